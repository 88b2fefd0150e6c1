package client_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/y3-dev/y3/bindings/go/client"
)

// A stream that ends inside a frame (the router killed while a frame is half written) is a
// lost connection: every client reconnects, on the handshake and mid-stream, while a
// malformed frame stays final (Error.Retryable, one rule). These tests put a relay in front
// of the real `y3 serve` that cuts the first frame of one type on its first connection one
// byte short and closes, or, for the malformed case, rewrites that frame's type.

// relayMode is what the relay does to the first frame of its type on its first connection.
type relayMode int

const (
	cutShort relayMode = iota // write all of it but the last byte, then close both sides
	garble                    // write it with a frame type no one knows (0x20), then go on
)

// unknownType is the frame type garble writes: not one of spec/frames.md's.
const unknownType = 0x20

// cutRelay relays TCP connections to a router, frame by frame from the router to the
// client, and spoils the first frame of type match on its first connection (and, with
// spoils, on the connections it names: 1 is the first).
type cutRelay struct {
	addr   string
	mode   relayMode
	spoils map[int32]client.FrameType
	conns  atomic.Int32 // connections accepted
	hits   atomic.Int32 // frames spoiled

	mu   sync.Mutex
	open []net.Conn
}

// startCutRelay listens on loopback and relays to upstream until the test ends.
func startCutRelay(t *testing.T, upstream string, match client.FrameType, mode relayMode) *cutRelay {
	t.Helper()
	return startSpoilingRelay(t, upstream, map[int32]client.FrameType{1: match}, mode)
}

// startSpoilingRelay is startCutRelay spoiling the first frame of type spoils[i] on
// connection i.
func startSpoilingRelay(t *testing.T, upstream string, spoils map[int32]client.FrameType, mode relayMode) *cutRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &cutRelay{addr: ln.Addr().String(), spoils: spoils, mode: mode}
	t.Cleanup(func() {
		_ = ln.Close()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, c := range r.open {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			match, spoil := r.spoils[r.conns.Add(1)]
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				_ = c.Close()
				continue
			}
			r.mu.Lock()
			r.open = append(r.open, c, up)
			r.mu.Unlock()
			go func() {
				_, _ = io.Copy(up, c)
				_ = up.(*net.TCPConn).CloseWrite()
			}()
			go r.down(c, up, match, spoil)
		}
	}()
	return r
}

// down copies the router's frames to the client, spoiling the first of type match when
// spoil is set.
func (r *cutRelay) down(c, up net.Conn, match client.FrameType, spoil bool) {
	defer c.Close()
	br := bufio.NewReader(up)
	for {
		raw, err := readRawFrame(br)
		if err != nil {
			return
		}
		if spoil && client.FrameType(raw[0]&0x3f) == match {
			spoil = false
			r.hits.Add(1)
			if r.mode == cutShort {
				_, _ = c.Write(raw[:len(raw)-1])
				_ = up.Close()
				return
			}
			raw[0] = 0x80 | unknownType
		}
		if _, err := c.Write(raw); err != nil {
			return
		}
	}
}

// readRawFrame reads one frame's bytes: the tag, the PVarInt32 length (one byte below 0x40,
// else 7 bits a byte, sign-extended, while the high bit is set), the body.
func readRawFrame(br *bufio.Reader) ([]byte, error) {
	tag, err := br.ReadByte()
	if err != nil {
		return nil, err
	}
	b, err := br.ReadByte()
	if err != nil {
		return nil, err
	}
	raw := []byte{tag, b}
	v := int64(b)
	if b >= 0x40 {
		v = int64(b&0x7f) << 57 >> 57
		for more := b&0x80 != 0; more; {
			if len(raw) == 6 {
				return nil, errors.New("frame length over 5 bytes")
			}
			c, err := br.ReadByte()
			if err != nil {
				return nil, err
			}
			raw = append(raw, c)
			v = v<<7 | int64(c&0x7f)
			more = c&0x80 != 0
		}
	}
	if v < 0 || v > 1<<24 {
		return nil, fmt.Errorf("frame length %d", v)
	}
	body := make([]byte, v)
	if _, err := io.ReadFull(br, body); err != nil {
		return nil, err
	}
	return append(raw, body...), nil
}

// cutOpts are a test client's options: quick backoff, a bounded number of attempts (so a
// client that retries for ever shows as gave_up, not as a hang).
func cutOpts(name string) client.Options {
	o := opts(name)
	o.Backoff = client.Backoff{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond, Attempts: 100}
	return o
}

// checkRelay fails unless the relay spoiled one frame on each connection it was told to
// and saw the wanted number of connections (at least, when atLeast).
func checkRelay(t *testing.T, r *cutRelay, conns int32, atLeast bool) {
	t.Helper()
	if h := r.hits.Load(); h != int32(len(r.spoils)) {
		t.Fatalf("the relay spoiled %d frames, want %d", h, len(r.spoils))
	}
	if c := r.conns.Load(); c != conns && !(atLeast && c > conns) {
		t.Fatalf("the relay saw %d connections, want %d", c, conns)
	}
}

// sendNumbered sends payloads prefix0..prefix{n-1} on tag.
func sendNumbered(t *testing.T, send func(uint32, []byte) (string, error), tag uint32, prefix string, n int) {
	t.Helper()
	for i := range n {
		if _, err := send(tag, []byte(prefix+strconv.Itoa(i))); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
}

// expectNumbered receives exactly n frames whose payloads are want0..want{n-1}, in order,
// skipping payloads that start with skip (probes), then no further such frame within a
// quiet second. With dups, a frame may repeat (at least once) and the check is that each
// arrived.
func expectNumbered(t *testing.T, ctx context.Context, sink *client.Sink, want, skip string, n int, dups bool) {
	t.Helper()
	count := make(map[string]int)
	next, distinct, total := 0, 0, 0
	for distinct < n {
		d, err := sink.Recv(ctx)
		if err != nil {
			t.Fatalf("received %d of %d frames: %v", distinct, n, err)
		}
		p := string(d.Payload)
		if skip != "" && strings.HasPrefix(p, skip) {
			continue
		}
		total++
		if count[p]++; count[p] == 1 {
			distinct++
		}
		switch {
		case p == want+strconv.Itoa(next):
			next++
		case dups && count[p] > 1:
		default:
			t.Fatalf("frame %q, want %q", p, want+strconv.Itoa(next))
		}
	}
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for {
		d, err := sink.Recv(qctx)
		if err != nil {
			break
		}
		p := string(d.Payload)
		if skip != "" && strings.HasPrefix(p, skip) {
			continue
		}
		if !dups || count[p] == 0 {
			t.Fatalf("an extra frame after %d: %q", n, p)
		}
		total++
	}
	t.Logf("%d of %d frames arrived (%d deliveries)", distinct, n, total)
}

// probeUntil sends probes on tag until one comes back through sink as what(probe).
func probeUntil(t *testing.T, ctx context.Context, src *client.Source, sink *client.Sink, tag uint32, what func(string) string) {
	t.Helper()
	for i := 0; ; i++ {
		probe := "probe" + strconv.Itoa(i)
		if _, err := src.Send(tag, []byte(probe)); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		d, err := sink.Recv(rctx)
		cancel()
		if err == nil && strings.HasPrefix(string(d.Payload), what("probe")) {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("no probe came through")
		}
	}
}

// seen is the test functions' handler: "seen:" and the input, on out.
func seen(out uint32) client.Handler {
	return func(_ context.Context, in client.Data) (uint32, []byte, bool, error) {
		return out, append([]byte("seen:"), in.Payload...), true, nil
	}
}

// serve runs f with h until the test's cancel; the result comes on the channel.
func serve(f *client.StreamFunction, ctx context.Context, h client.Handler) <-chan error {
	done := make(chan error, 1)
	go func() { done <- f.Serve(ctx, h) }()
	return done
}

// cutSink connects a sink of tag to addr, closed when the test ends.
func cutSink(t *testing.T, ctx context.Context, addr, name string, tag uint32) *client.Sink {
	t.Helper()
	sink, err := client.ConnectSink(ctx, addr, cutOpts(name), []uint32{tag})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	return sink
}

// throughCutFunction runs a stream function behind a relay that cuts the first frame of
// type typ one byte short: the function connects again and every one of n frames a source
// sends on in comes out on out (a probe first when the cut frame is a data frame, so the
// cut lands before the counted frames).
func throughCutFunction(t *testing.T, ctx context.Context, r *router, typ client.FrameType, in, out uint32, name string, n int) {
	t.Helper()
	sink := cutSink(t, ctx, r.tcp, name+"-sink", out)
	relay := startCutRelay(t, r.tcp, typ, cutShort)
	fn, err := client.ConnectStreamFunction(ctx, relay.addr, cutOpts(name+"-function"), []uint32{in})
	if err != nil {
		t.Fatalf("connect through the cutting relay: %v", err)
	}
	fctx, stop := context.WithCancel(ctx)
	done := serve(fn, fctx, seen(out))
	src, skip := probedSource(t, ctx, r, sink, typ, in, name, "seen:")
	defer src.Close()
	sendNumbered(t, src.Send, in, "f", n)
	expectNumbered(t, ctx, sink, "seen:f", skip, n, false)
	stopServe(t, stop, done)
	checkRelay(t, relay, 2, false)
}

// probedSource connects a source to r and, when the frame the relay cuts is a data frame,
// sends probes on tag until sink reads one (as seen + payload), so the cut lands before the
// counted frames; it returns the source and the payload the count skips ("" without probes).
func probedSource(t *testing.T, ctx context.Context, r *router, sink *client.Sink, typ client.FrameType, tag uint32, name, seen string) (*client.Source, string) {
	t.Helper()
	src, err := client.ConnectSource(ctx, r.tcp, cutOpts(name+"-source"))
	if err != nil {
		t.Fatal(err)
	}
	if typ != client.TypeData {
		return src, ""
	}
	probeUntil(t, ctx, src, sink, tag, func(p string) string { return seen + p })
	return src, seen + "probe"
}

// throughCutSink runs a sink of tag behind a relay that cuts the first frame of type typ
// one byte short: the sink connects again and receives every one of n frames a source sends
// (a probe first when the cut frame is a data frame, so the cut lands before the counted
// frames).
func throughCutSink(t *testing.T, ctx context.Context, r *router, typ client.FrameType, tag uint32, name string, n int) {
	t.Helper()
	relay := startCutRelay(t, r.tcp, typ, cutShort)
	sink, err := client.ConnectSink(ctx, relay.addr, cutOpts(name+"-sink"), []uint32{tag})
	if err != nil {
		t.Fatalf("connect through the cutting relay: %v", err)
	}
	defer sink.Close()
	src, skip := probedSource(t, ctx, r, sink, typ, tag, name, "")
	defer src.Close()
	sendNumbered(t, src.Send, tag, "k", n)
	expectNumbered(t, ctx, sink, "k", skip, n, false)
	checkRelay(t, relay, 2, false)
}

// stopServe cancels a function and checks that Serve returned nil.
func stopServe(t *testing.T, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("function: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the function did not stop")
	}
}

// Every client whose first handshake answer (the ack) is cut one byte short connects again
// and works: a source, a durable source, a stream function and a sink, each behind its own
// relay (two connections each), exactly n frames through.
func TestRouterHandshakeAnswerCutInsideAFrameIsRetried(t *testing.T) {
	const n = 200
	r := startRouter(t, routerOpts{token: token})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("source", func(t *testing.T) {
		const tag = 0x41
		sink := cutSink(t, ctx, r.tcp, "cut-hs-sink", tag)
		relay := startCutRelay(t, r.tcp, client.TypeHandshakeAck, cutShort)
		src, err := client.ConnectSource(ctx, relay.addr, cutOpts("cut-hs-source"))
		if err != nil {
			t.Fatalf("connect through the cutting relay: %v", err)
		}
		sendNumbered(t, src.Send, tag, "s", n)
		if err := src.Close(); err != nil {
			t.Fatal(err)
		}
		expectNumbered(t, ctx, sink, "s", "", n, false)
		checkRelay(t, relay, 2, false)
	})

	t.Run("durable_source", func(t *testing.T) {
		const tag = 0x42
		sink := cutSink(t, ctx, r.tcp, "cut-hs-sink", tag)
		relay := startCutRelay(t, r.tcp, client.TypeHandshakeAck, cutShort)
		src, err := client.ConnectDurableSource(ctx, relay.addr, cutOpts("cut-hs-durable"))
		if err != nil {
			t.Fatalf("connect through the cutting relay: %v", err)
		}
		sendNumbered(t, src.Send, tag, "d", n)
		if err := src.Close(ctx); err != nil {
			t.Fatal(err)
		}
		expectNumbered(t, ctx, sink, "d", "", n, false)
		checkRelay(t, relay, 2, false)
	})

	t.Run("function", func(t *testing.T) {
		throughCutFunction(t, ctx, r, client.TypeHandshakeAck, 0x43, 0x44, "cut-hs", n)
	})

	t.Run("sink", func(t *testing.T) {
		throughCutSink(t, ctx, r, client.TypeHandshakeAck, 0x45, "cut-hs", n)
	})
}

// Mid-stream: a stream function and a sink whose first data frame is cut one byte short,
// and a durable source whose first stored acknowledgement is, reconnect by themselves and
// carry exactly n frames afterwards (the durable source writes again what was not
// acknowledged: each of its n frames arrives, some possibly twice, as at least once allows).
func TestRouterFrameCutInsideAFrameMidStreamIsRetried(t *testing.T) {
	const n = 200
	r := startRouter(t, routerOpts{token: token})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("sink", func(t *testing.T) {
		throughCutSink(t, ctx, r, client.TypeData, 0x51, "cut-data", n)
	})

	t.Run("function", func(t *testing.T) {
		throughCutFunction(t, ctx, r, client.TypeData, 0x52, 0x53, "cut-data", n)
	})

	t.Run("durable_source", func(t *testing.T) {
		const tag = 0x54
		sink := cutSink(t, ctx, r.tcp, "cut-stored-sink", tag)
		relay := startCutRelay(t, r.tcp, client.TypeStored, cutShort)
		src, err := client.ConnectDurableSource(ctx, relay.addr, cutOpts("cut-stored-durable"))
		if err != nil {
			t.Fatal(err)
		}
		sendNumbered(t, src.Send, tag, "d", n)
		if err := src.WaitStored(ctx); err != nil {
			t.Fatal(err)
		}
		if err := src.Close(ctx); err != nil {
			t.Fatal(err)
		}
		expectNumbered(t, ctx, sink, "d", "", n, true)
		checkRelay(t, relay, 2, true)
	})
}

// The durable source's keeper goroutine, reconnecting by itself after its first stored
// acknowledgement was cut, has the answer to that second handshake cut too: it dials a
// third time and writes again what was not acknowledged, with no further call on the
// source, until the router stored all n frames (Unacked drops to 0); each reached the sink
// (at least once).
func TestRouterDurableKeeperRetriesAHandshakeAnswerCutInsideAFrame(t *testing.T) {
	const n, tag = 200, 0x55
	r := startRouter(t, routerOpts{token: token})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sink := cutSink(t, ctx, r.tcp, "cut-keeper-sink", tag)
	relay := startSpoilingRelay(t, r.tcp,
		map[int32]client.FrameType{1: client.TypeStored, 2: client.TypeHandshakeAck}, cutShort)
	src, err := client.ConnectDurableSource(ctx, relay.addr, cutOpts("cut-keeper-durable"))
	if err != nil {
		t.Fatal(err)
	}
	sendNumbered(t, src.Send, tag, "d", n)
	// No call on the source: only the keeper can have the frames stored.
	for deadline := time.Now().Add(20 * time.Second); src.Unacked() > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d frames not stored after 20 s", src.Unacked(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	expectNumbered(t, ctx, sink, "d", "", n, true)
	if err := src.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkRelay(t, relay, 3, false)
}

// A malformed answer is not a lost connection: every client whose handshake answer has a
// frame type no one knows fails at once with unknown_frame, after one connection. (Mid-stream
// a malformed frame ends that connection and the client dials again, as YoMo's clients do;
// TestFakeSinkReconnects.)
func TestRouterMalformedHandshakeAnswerIsFinal(t *testing.T) {
	r := startRouter(t, routerOpts{token: token})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	connect := map[string]func(addr string) error{
		"source": func(addr string) error {
			_, err := client.ConnectSource(ctx, addr, cutOpts("garbled-source"))
			return err
		},
		"durable_source": func(addr string) error {
			_, err := client.ConnectDurableSource(ctx, addr, cutOpts("garbled-durable"))
			return err
		},
		"function": func(addr string) error {
			_, err := client.ConnectStreamFunction(ctx, addr, cutOpts("garbled-function"), []uint32{0x61})
			return err
		},
		"sink": func(addr string) error {
			_, err := client.ConnectSink(ctx, addr, cutOpts("garbled-sink"), []uint32{0x62})
			return err
		},
	}
	for name, connect := range connect {
		t.Run(name, func(t *testing.T) {
			relay := startCutRelay(t, r.tcp, client.TypeHandshakeAck, garble)
			err := connect(relay.addr)
			if k := client.KindOf(err); k != client.KindUnknownFrame || client.Retryable(err) {
				t.Fatalf("connect: %v (kind %q), want unknown_frame, not retryable", err, k)
			}
			time.Sleep(300 * time.Millisecond) // a second attempt would show here
			checkRelay(t, relay, 1, false)
		})
	}
}
