#!/usr/bin/env python3
"""Router cost per routed frame with YoMo's own Go clients (QUIC), counted, not timed.

Starts a router (`y3 serve` or YoMo's zipper, `yomo-peer zipper`), connects YoMo's sink
(and, for `relay`, a stream function re-emitting 0x33 as 0x34), then counts while YoMo's
source writes N messages flat out, until the sink has them all:

- the router's syscalls and context switches (`perf stat -p`, syscall tracepoints, every
  thread of the router, over exactly that window);
- the router's CPU time (the sum of its threads' `/proc/PID/task/*/schedstat` run time, ns,
  and user + system from `/proc/PID/stat` as the lab reads it);
- UDP datagrams on the host (`/proc/net/snmp` InDatagrams / OutDatagrams): on loopback every
  datagram the router or a client sends is counted once each way;
- the sink's msg/s, a guide only on a shared machine.

Per routed frame = count / (N × frames routed per message: 1 for sink, 2 for relay). Counts
depend on batching (how fast each side keeps up), so compare routers in the same run.

Also: `--record FILE` profiles the router over the same window instead (`perf record`;
`--callgraph` for DWARF stacks; `--record-events E` records E on every process, e.g.
`net:net_dev_xmit` to see who sends each datagram), and `--router-log FILE` with
`RUST_LOG=info,y3_transport::quic::stats=debug` keeps y3 serve's per-connection QUIC
counts (datagrams and system calls each way, ACK and credit frames, losses).

The router and the clients share the machine's cores, as in `y3-lab net yomo`. Needs
`perf` (root, or perf_event_paranoid <= 1) and YoMo's clients (`go build -o target/yomo-peer
./cmd/yomo-peer` in interop/yomo).

usage: perframe-yomo.py --router y3|zipper [--y3 BIN] [--peer yomo-peer] [--workload sink|relay]
                        [--size BYTES] [--count N] [--rate MSG_S] [--runs R]
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

SYSCALLS = [
    "sendmsg", "sendmmsg", "recvmsg", "recvmmsg", "epoll_wait", "epoll_pwait", "futex",
    "write", "read", "sched_yield", "sendto", "recvfrom",
]


def snmp_udp():
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Udp:")]
    d = dict(zip(rows[0][1:], map(int, rows[1][1:])))
    return d["InDatagrams"], d["OutDatagrams"], d.get("RcvbufErrors", 0)


def cpu(pid):
    run_ns = 0
    vol = invol = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                run_ns += int(f.read().split()[0])
            with open(f"/proc/{pid}/task/{t}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        vol += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        invol += int(line.split()[1])
        except FileNotFoundError:
            pass
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    return run_ns, ticks, vol, invol, int(fields[7]), int(fields[12])


def read_json_line(proc, key, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if key in v:
            return v
    raise SystemExit(f"no {key!r} line from the router")


def start_router(a, tmp):
    if a.router == "zipper":
        p = subprocess.Popen([a.peer, "zipper", "--addr", "127.0.0.1:0"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True,
                             env={**os.environ, "YOMO_LOG_LEVEL": "error"})
        return p, p.pid, read_json_line(p, "listening")["listening"]
    conf = os.path.join(tmp, "serve.toml")
    with open(conf, "w") as f:
        f.write("[queue]\nblock_timeout_ms = 250\n")
    p = subprocess.Popen([a.y3, "serve", "--tcp", "", "--quic", "127.0.0.1:0", "--metrics", "",
                          "--dev-cert-out", os.path.join(tmp, "cert.pem"), "--config", conf],
                         stdout=subprocess.PIPE, text=True,
                         stderr=open(a.router_log, "w") if a.router_log else subprocess.DEVNULL)
    while True:
        line = p.stdout.readline()
        if not line:
            raise SystemExit("y3 serve exited")
        if "listening" in line:
            return p, p.pid, line.split("quic ")[1].split()[0]


def one(a):
    routed = 2 if a.workload == "relay" else 1
    with tempfile.TemporaryDirectory() as tmp:
        router, pid, addr = start_router(a, tmp)
        env = {**os.environ, "YOMO_LOG_LEVEL": "error"}
        clients = []
        try:
            sink_tag = "0x34" if a.workload == "relay" else "0x33"
            cmd = [a.peer, "sink", "--addr", addr, "--observe", sink_tag,
                   "--count", str(a.count), "--timeout-s", "120"]
            sink = subprocess.Popen(cmd,
                                    stdout=subprocess.PIPE, stderr=open(os.path.join(tmp, "sink.err"), "w"), text=True,
                                    env=env)
            clients.append(sink)
            if a.workload == "relay":
                clients.append(subprocess.Popen(
                    [a.peer, "sfn", "--addr", addr, "--observe", "0x33", "--emit", "0x34"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
            time.sleep(2)
            events = ",".join(["raw_syscalls:sys_enter", "context-switches", "cpu-migrations"]
                              + [f"syscalls:sys_enter_{s}" for s in SYSCALLS])
            perf_out = os.path.join(tmp, "perf")
            if a.record:
                # A profile of the same window instead of the counts (`perf report -i`).
                what = (["-a", "-e", a.record_events] if a.record_events
                        else ["-F", "5000", *(["--call-graph", "dwarf,16384"] if a.callgraph else []), "-p", str(pid)])
                perf = subprocess.Popen(["perf", "record", "-o", a.record, *what],
                                        stderr=subprocess.DEVNULL)
            else:
                perf = subprocess.Popen(["perf", "stat", "-x,", "-o", perf_out, "-e", events,
                                         "-p", str(pid)], stderr=subprocess.DEVNULL)
            time.sleep(0.5)
            c0, u0 = cpu(pid), snmp_udp()
            cmd = [a.peer, "source", "--addr", addr, "--tag", "0x33", "--count", str(a.count),
                   "--size", str(a.size), "--rate", str(a.rate), "--linger", "130s"]
            source = subprocess.Popen(cmd,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      env=env)
            clients.append(source)
            print(json.dumps({"router_pid": pid, "sink_pid": sink.pid, "source_pid": source.pid,
                              "sfn_pid": clients[1].pid if a.workload == "relay" else None}),
                  file=sys.stderr)
            report = sink.stdout.read()
            sink.wait()
            c1, u1 = cpu(pid), snmp_udp()
            perf.send_signal(signal.SIGINT)
            perf.wait()
        finally:
            for c in clients:
                c.kill()
                c.wait()
            router.send_signal(signal.SIGTERM)
            try:
                router.wait(timeout=10)
            except subprocess.TimeoutExpired:
                router.kill()
        if not report.strip():
            raise SystemExit("the sink reported nothing: " + open(os.path.join(tmp, "sink.err")).read()[-2000:])
        summary = json.loads(report.strip().splitlines()[-1])
        got = summary.get("received", summary.get("count", 0))
        counts = {}
        with open(perf_out if not a.record else os.devnull) as f:
            for line in f:
                parts = line.strip().split(",")
                if len(parts) > 2 and parts[0].replace(".", "").isdigit():
                    counts[parts[2]] = int(float(parts[0]))
        frames = a.count * routed
        r = {
            "router": a.router, "workload": a.workload, "size": a.size, "count": a.count,
            "received": got, "msg_s": summary.get("msg_per_s"),
            "cpu_us": (c1[0] - c0[0]) / 1e3 / frames,
            "cpu_ticks_us": (c1[1] - c0[1]) * 1e6 / os.sysconf("SC_CLK_TCK") / frames,
            "vol_switches": (c1[2] - c0[2]) / frames,
            "invol_switches": (c1[3] - c0[3]) / frames,
            "minor_faults": (c1[4] - c0[4]) / frames,
            "sys_share": (c1[5] - c0[5]) / max(1, c1[1] - c0[1]),
            "udp_in": (u1[0] - u0[0]) / frames,
            "udp_out": (u1[1] - u0[1]) / frames,
            "rcvbuf_errors": u1[2] - u0[2],
            "syscalls": counts.get("raw_syscalls:sys_enter", 0) / frames,
            "ctx_switches_perf": counts.get("context-switches", 0) / frames,
        }
        for s in SYSCALLS:
            n = counts.get(f"syscalls:sys_enter_{s}", 0)
            if n:
                r[s] = n / frames
        return r, summary


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--router", choices=["y3", "zipper"], required=True)
    ap.add_argument("--y3", default=os.path.join(here, "..", "target", "release", "y3"))
    ap.add_argument("--peer", default=os.path.join(here, "..", "target", "yomo-peer"))
    ap.add_argument("--rate", type=float, default=0, help="source msg/s (0: flat out)")
    ap.add_argument("--workload", choices=["sink", "relay"], default="sink")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--record", help="perf record the router into this file instead")
    ap.add_argument("--record-events", help="with --record: these events, every process")
    ap.add_argument("--callgraph", action="store_true", help="with --record: DWARF call graphs")
    ap.add_argument("--router-log", help="y3 serve's stderr goes here (with RUST_LOG=info,"
                    "y3_transport::quic::stats=debug: each QUIC connection's packet counts)")
    ap.add_argument("--raw", action="store_true", help="print the sink's summary too")
    a = ap.parse_args()
    for _ in range(a.runs):
        r, summary = one(a)
        if a.raw:
            print(json.dumps(summary), file=sys.stderr)
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v)
                          for k, v in r.items()}), flush=True)


if __name__ == "__main__":
    main()
