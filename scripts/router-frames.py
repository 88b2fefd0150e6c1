#!/usr/bin/env python3
"""Pushes N YoMo v1.22 data frames through a router over TCP loopback, raw frames.

A source sends N frames (64 B payload, YoMo's ~70 B of metadata: yomo-tid, yomo-source-id)
on tag 0x33; a stream function observing 0x33 writes each back on 0x34 (so the router also
routes function frames, whose tid it follows); a sink observing 0x34 counts them. Exits 0
when the sink has all N, 1 otherwise. For measuring the router's per-frame cost (callgrind,
strace -c) from outside: the clients here are not measured.

usage: router-frames.py HOST:PORT N [--direct]   (--direct: the sink observes 0x33, no relay)
"""
import socket, sys, threading, time


def vlen(n):
    bits = n.bit_length() + 1
    groups = max(1, (bits + 6) // 7)
    out = []
    for i in range(groups - 1, -1, -1):
        g = (n >> (7 * i)) & 0x7F
        out.append(g | (0x80 if i else 0))
    return bytes(out)


def field(key, value):
    return bytes([key]) + vlen(len(value)) + value


def frame(kind, body):
    return bytes([0x80 | kind]) + vlen(len(body)) + body


def nvar(v):
    for n in range(1, 5):
        if -(1 << (8 * n - 1)) <= v < (1 << (8 * n - 1)):
            return v.to_bytes(n, "big", signed=True)
    return (v & 0xFFFFFFFF).to_bytes(4, "big")


def handshake(name, cid, ctype, observed):
    body = (field(1, name.encode()) + field(3, cid.encode()) + field(2, bytes([ctype]))
            + field(6, b"".join(t.to_bytes(4, "little") for t in observed))
            + field(4, b"") + field(5, b"") + field(7, b"2024-01-03")
            + field(9, b"") + field(8, b""))
    return frame(0x31, body)


def mstr(s):
    b = s.encode()
    return bytes([0xA0 | len(b)]) + b if len(b) < 32 else bytes([0xD9, len(b)]) + b


def data(tag, metadata, payload):
    return frame(0x3F, field(1, nvar(tag)) + field(3, metadata) + field(2, payload))


def read_frame(sock, buf):
    while True:
        if len(buf) >= 2:
            n, i = 0, 1
            while i < len(buf):
                b = buf[i]
                n = (n << 7) | (b & 0x7F)
                i += 1
                if not b & 0x80:
                    if len(buf) >= i + n:
                        f = bytes(buf[: i + n]); body = f[i:]
                        del buf[: i + n]
                        return f[0] & 0x3F, body
                    break
        chunk = sock.recv(1 << 16)
        if not chunk:
            return None, None
        buf.extend(chunk)


def fields(body):
    out, i = {}, 0
    while i < len(body):
        key = body[i]; i += 1
        n = 0
        while True:
            b = body[i]; i += 1
            n = (n << 7) | (b & 0x7F)
            if not b & 0x80:
                break
        out[key] = body[i:i + n]; i += n
    return out


def connect(addr, hello):
    s = socket.create_connection(addr)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(hello)
    buf = bytearray()
    kind, _ = read_frame(s, buf)
    assert kind == 0x29, f"no handshake ack: {kind}"
    return s, buf


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    addr = (host, int(port)); n = int(sys.argv[2]); direct = "--direct" in sys.argv
    sink_tag = 0x33 if direct else 0x34
    sink, sbuf = connect(addr, handshake("sink", "sink-1", 0x5D, [sink_tag]))
    if not direct:
        relay, rbuf = connect(addr, handshake("relay", "relay-1", 0x5D, [0x33]))
    src, _ = connect(addr, handshake("src", "src-1", 0x5F, []))
    time.sleep(0.2)
    got = [0]

    def sink_loop():
        while got[0] < n:
            kind, _ = read_frame(sink, sbuf)
            if kind is None:
                return
            if kind == 0x3F:
                got[0] += 1

    def relay_loop():
        seen, out = 0, bytearray()
        while seen < n:
            kind, body = read_frame(relay, rbuf)
            if kind is None:
                return
            if kind != 0x3F:
                continue
            f = fields(body)
            out += data(0x34, f.get(3, b""), f.get(2, b""))
            seen += 1
            if len(rbuf) == 0 or len(out) > 32768:
                relay.sendall(out); out.clear()
        if out:
            relay.sendall(out)

    threads = [threading.Thread(target=sink_loop)]
    if not direct:
        threads.append(threading.Thread(target=relay_loop))
    for t in threads:
        t.start()
    payload = bytes(range(64))
    batch = bytearray()
    for i in range(n):
        md = b"\x82" + mstr("yomo-tid") + mstr(f"{i:032x}") + mstr("yomo-source-id") + mstr("src-1-0001")
        batch += data(0x33, md, payload)
        if len(batch) > 16384:
            src.sendall(batch); batch.clear()
    src.sendall(batch)
    for t in threads:
        t.join(timeout=600)
    print(f"sent {n} received {got[0]}")
    sys.exit(0 if got[0] == n else 1)


main()
