package client_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/y3-dev/y3/bindings/go/client"
)

// fakeRouter is a minimal in-process router for the tests that must run without the Rust
// binary: it checks the token, answers accepted, routes data frames by tag to the
// connections observing it (never back to the sender) and answers pings. Hooks let a test
// misbehave on purpose.
type fakeRouter struct {
	t     *testing.T
	ln    net.Listener
	token string

	// onAccepted, when set, runs after the accepted frame is written; returning false
	// ends the connection.
	onAccepted func(c *fakeConn) bool
	// answer, when set, replaces the handshake's answer.
	answer func(h client.Handshake) client.Frame

	mu      sync.Mutex
	subs    map[uint32][]*fakeConn
	conns   []*fakeConn
	session atomic.Uint64
	pongs   atomic.Int64
	dataIn  atomic.Int64
}

type fakeConn struct {
	c    net.Conn
	mu   sync.Mutex
	role client.Role
}

func (c *fakeConn) send(f client.Frame) error {
	b, err := client.EncodeFrame(f, 0)
	if err != nil {
		return err
	}
	return c.write(b)
}

func (c *fakeConn) write(b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.c.Write(b)
	return err
}

func newFakeRouter(t *testing.T, token string) *fakeRouter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &fakeRouter{t: t, ln: ln, token: token, subs: map[uint32][]*fakeConn{}}
	t.Cleanup(r.close)
	return r
}

func (r *fakeRouter) subscribed(tag uint32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.subs[tag]) > 0
}

func (r *fakeRouter) addr() string { return r.ln.Addr().String() }

func (r *fakeRouter) start() *fakeRouter {
	go func() {
		for {
			c, err := r.ln.Accept()
			if err != nil {
				return
			}
			fc := &fakeConn{c: c}
			r.mu.Lock()
			r.conns = append(r.conns, fc)
			r.mu.Unlock()
			go r.serve(fc)
		}
	}()
	return r
}

func (r *fakeRouter) close() {
	_ = r.ln.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		_ = c.c.Close()
	}
}

// dropAll closes every connection (a crash, as the clients see it).
func (r *fakeRouter) dropAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		_ = c.c.Close()
	}
	r.conns = nil
	r.subs = map[uint32][]*fakeConn{}
}

func (r *fakeRouter) serve(c *fakeConn) {
	defer c.c.Close()
	fr := client.NewFrameReader(c.c, 0)
	f, err := fr.Next()
	if err != nil {
		return
	}
	h, ok := f.(client.Handshake)
	if !ok {
		_ = c.send(client.Goaway{Code: client.CodeProtocolError})
		return
	}
	var answer client.Frame = client.Accepted{Version: client.Version, Session: r.session.Add(1)}
	if h.Token != r.token {
		answer = client.Goaway{Code: client.CodeUnauthorized, Reason: "wrong token"}
	}
	if r.answer != nil {
		answer = r.answer(h)
	}
	if answer == nil {
		return
	}
	if _, ok := answer.(client.Accepted); ok {
		// Subscribed before the answer, as the router does.
		c.role = h.Role
		r.mu.Lock()
		for _, tag := range h.Observed {
			r.subs[tag] = append(r.subs[tag], c)
		}
		r.mu.Unlock()
	}
	if err := c.send(answer); err != nil {
		return
	}
	if _, ok := answer.(client.Accepted); !ok {
		return
	}
	if r.onAccepted != nil && !r.onAccepted(c) {
		return
	}
	for {
		f, err := fr.Next()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case client.Data:
			r.dataIn.Add(1)
			b, _ := client.EncodeFrame(f, 0)
			r.mu.Lock()
			subs := append([]*fakeConn(nil), r.subs[f.Tag]...)
			r.mu.Unlock()
			for _, s := range subs {
				if s != c {
					_ = s.write(b)
				}
			}
		case client.Ping:
			_ = c.send(client.Pong(f))
		case client.Pong:
			r.pongs.Add(1)
		}
	}
}

func fastOpts() client.Options {
	return client.Options{Name: "t", Token: token, HandshakeTimeout: time.Second,
		Backoff: client.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond, Attempts: 3},
		Linger:  500 * time.Millisecond}
}

func TestFakeSourceFunctionSink(t *testing.T) {
	r := newFakeRouter(t, token).start()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sink, err := client.ConnectSink(ctx, r.addr(), fastOpts(), []uint32{0x20})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	fnCtx, stopFn := context.WithCancel(ctx)
	fnDone := make(chan error, 1)
	go func() {
		fnDone <- client.RunStreamFunction(fnCtx, r.addr(), fastOpts(), []uint32{0x10},
			func(_ context.Context, in client.Data) (uint32, []byte, bool, error) {
				if in.Payload[0]%2 == 1 {
					return 0, nil, false, nil
				}
				return 0x20, append(in.Payload[:1:1], bytes.ToUpper(in.Payload[1:])...), true, nil
			})
	}()
	for !r.subscribed(0x10) {
		time.Sleep(time.Millisecond)
	}
	src, err := client.ConnectSource(ctx, r.addr(), fastOpts())
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	payload := []byte("xabc")
	for i := range n {
		payload[0] = byte(i)
		if _, err := src.Send(0x10, payload); err != nil { // payload reused: Send copies
			t.Fatal(err)
		}
	}
	if err := src.SendData(ctx, client.Data{Tag: 0x10, ID: 1 << 40, Metadata: []byte("m"), Payload: []byte{2}}); err != nil {
		t.Fatal(err)
	}
	if id, err := src.Send(0x10, []byte{1}); err != nil || id != 1<<40+1 {
		t.Fatal(id, err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	got := recvN(t, ctx, sink, n/2+1, 100*time.Millisecond)
	for i, d := range got[:n/2] {
		if d.ID != uint64(2*i+1) || d.Hops != 1 || !bytes.Equal(d.Payload, []byte{byte(2 * i), 'A', 'B', 'C'}) || d.Metadata != nil {
			t.Fatalf("%d: %#v", i, d)
		}
	}
	if last := got[n/2]; last.ID != 1<<40 || string(last.Metadata) != "m" || last.Hops != 1 {
		t.Fatalf("%#v", last)
	}
	stopFn()
	if err := <-fnDone; err != nil {
		t.Fatal(err)
	}
	if _, err := src.Send(0x10, nil); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("send after close: %v", err)
	}
}

func TestFakeRefusalsAreNotRetried(t *testing.T) {
	r := newFakeRouter(t, token).start()
	o := fastOpts()
	o.Token = "guess"
	o.Backoff.Attempts = 50
	start := time.Now()
	_, err := client.ConnectSource(context.Background(), r.addr(), o)
	var e *client.Error
	if !errors.As(err, &e) || e.Kind != client.KindUnauthorized || e.Reason != "wrong token" {
		t.Fatalf("%#v", err)
	}
	if r.session.Load() != 1 || time.Since(start) > time.Second {
		t.Fatal("retried")
	}
	r.answer = func(client.Handshake) client.Frame { return client.Ping{Nonce: 1} }
	_, err = client.ConnectSink(context.Background(), r.addr(), fastOpts(), []uint32{1})
	if !errors.As(err, &e) || e.Kind != client.KindUnexpectedFrame || e.Found != "ping" || e.Expected != "accepted" {
		t.Fatalf("%#v", err)
	}
}

func TestFakeGivesUpOnAClosingRouter(t *testing.T) {
	r := newFakeRouter(t, token)
	var attempts atomic.Int64
	r.answer = func(client.Handshake) client.Frame { attempts.Add(1); return nil } // close at once
	r.start()
	_, err := client.ConnectSource(context.Background(), r.addr(), fastOpts())
	var e *client.Error
	if !errors.As(err, &e) || e.Kind != client.KindGaveUp || e.Attempts != 3 || !errors.Is(err, client.ErrClosed) {
		t.Fatalf("%#v", err)
	}
	if attempts.Load() != 3 {
		t.Fatalf("%d attempts", attempts.Load())
	}
	// Nobody listening: io errors, retried, then gave_up.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	_ = ln.Close()
	_, err = client.ConnectSink(context.Background(), addr, fastOpts(), []uint32{1})
	if !errors.Is(err, client.ErrGaveUp) || !errors.Is(err, client.ErrIO) {
		t.Fatalf("%v", err)
	}
}

func TestFakeHandshakeTimeoutAndCancel(t *testing.T) {
	r := newFakeRouter(t, token)
	block := make(chan struct{})
	defer close(block)
	r.answer = func(client.Handshake) client.Frame { <-block; return nil }
	r.start()
	o := fastOpts()
	o.HandshakeTimeout = 100 * time.Millisecond
	o.Backoff.Attempts = 1
	start := time.Now()
	_, err := client.ConnectSource(context.Background(), r.addr(), o)
	if !errors.Is(err, client.ErrGaveUp) || !errors.Is(err, client.ErrTimeout) {
		t.Fatalf("%v", err)
	}
	if time.Since(start) > time.Second {
		t.Fatal(time.Since(start))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	o.HandshakeTimeout = 5 * time.Second
	_, err = client.ConnectStreamFunction(ctx, r.addr(), o, []uint32{1})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v", err)
	}
}

func TestFakePingIsAnswered(t *testing.T) {
	r := newFakeRouter(t, token)
	r.onAccepted = func(c *fakeConn) bool { _ = c.send(client.Ping{Nonce: 9}); return true }
	r.start()
	ctx := context.Background()
	sink, err := client.ConnectSink(ctx, r.addr(), fastOpts(), []uint32{1})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	src, err := client.ConnectSource(ctx, r.addr(), fastOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	deadline := time.Now().Add(5 * time.Second)
	for r.pongs.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if r.pongs.Load() != 2 {
		t.Fatalf("%d pongs", r.pongs.Load())
	}
}

// A goaway is reported by Send once; the next Send reconnects.
func TestFakeSourceGoawayOnceThenReconnect(t *testing.T) {
	r := newFakeRouter(t, token)
	var first atomic.Bool
	r.onAccepted = func(c *fakeConn) bool {
		if first.CompareAndSwap(false, true) {
			_ = c.send(client.Goaway{Code: client.CodeShuttingDown, Reason: "bye"})
		}
		return true
	}
	r.start()
	var seen atomic.Int64
	o := fastOpts()
	o.OnGoaway = func(g client.Goaway) { seen.Add(1) }
	src, err := client.ConnectSource(context.Background(), r.addr(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	firstSession := src.Session()
	var sendErr error
	for range 1000 {
		if _, sendErr = src.Send(1, []byte("x")); sendErr != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var e *client.Error
	if !errors.As(sendErr, &e) || e.Kind != client.KindShuttingDown || e.Reason != "bye" || seen.Load() != 1 {
		t.Fatalf("%#v", sendErr)
	}
	if _, err := src.Send(1, []byte("y")); err != nil {
		t.Fatal(err)
	}
	if src.Session() == firstSession {
		t.Fatal("no reconnection")
	}
	if err := src.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// The sink reconnects after the router drops it, and refuses an oversized frame by
// ending that connection (then reconnecting).
func TestFakeSinkReconnects(t *testing.T) {
	r := newFakeRouter(t, token)
	var n atomic.Int64
	r.onAccepted = func(c *fakeConn) bool {
		switch n.Add(1) {
		case 1:
			_ = c.send(client.Data{Tag: 1, ID: 1, Payload: []byte("one")})
			return false // dropped
		case 2:
			// A data frame declaring 2 MiB: refused from its header.
			_ = c.write([]byte{0xbf, 0x81, 0x80, 0x80, 0x00})
			_ = c.write(bytes.Repeat([]byte{0}, 1000))
			return true
		default:
			_ = c.send(client.Data{Tag: 1, ID: 3, Payload: []byte("three")})
			return true
		}
	}
	r.start()
	o := fastOpts()
	o.Backoff.Attempts = 10
	sink, err := client.ConnectSink(context.Background(), r.addr(), o, []uint32{1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, want := range []string{"one", "three"} {
		d, err := sink.Recv(ctx)
		if err != nil || string(d.Payload) != want {
			t.Fatalf("%q %v, want %q", d.Payload, err, want)
		}
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-sink.C(); ok {
		t.Fatal("channel open after Close")
	}
	if _, err := sink.Recv(ctx); !errors.Is(err, client.ErrClosed) || sink.Err() != nil {
		t.Fatal(err, sink.Err())
	}
}

func TestFakeHandlerErrorStopsTheFunction(t *testing.T) {
	r := newFakeRouter(t, token).start()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	boom := errors.New("boom")
	fn, err := client.ConnectStreamFunction(ctx, r.addr(), fastOpts(), []uint32{1})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- fn.Serve(ctx, func(context.Context, client.Data) (uint32, []byte, bool, error) { return 0, nil, false, boom })
	}()
	src, err := client.ConnectSource(ctx, r.addr(), fastOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.Send(1, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != boom {
		t.Fatal(err)
	}
	if err := fn.Serve(ctx, nil); !errors.Is(err, client.ErrClosed) {
		t.Fatal(err)
	}
}

func TestSendTooLongKeepsTheConnection(t *testing.T) {
	r := newFakeRouter(t, token).start()
	o := fastOpts()
	o.MaxFrameLen = 1000
	src, err := client.ConnectSource(context.Background(), r.addr(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.Send(1, make([]byte, 1000)); !errors.Is(err, client.ErrTooLong) {
		t.Fatal(err)
	}
	if _, err := src.Send(1, make([]byte, 900)); err != nil {
		t.Fatal(err)
	}
	if err := src.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for r.dataIn.Load() < 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if r.session.Load() != 1 || r.dataIn.Load() != 1 {
		t.Fatal(r.session.Load(), r.dataIn.Load())
	}
	if _, err := src.SendMarshal(0x40, 1); client.KindOf(err) != "invalid_tag" {
		t.Fatal(err)
	}
}

func TestBackoffDelay(t *testing.T) {
	b := client.Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Attempts: 5}
	for range 100 {
		if d := b.Delay(0); d < 75*time.Millisecond || d > 100*time.Millisecond {
			t.Fatal(d)
		}
		if d := b.Delay(3); d < 600*time.Millisecond || d > 800*time.Millisecond {
			t.Fatal(d)
		}
		if d := b.Delay(60); d < 750*time.Millisecond || d > time.Second {
			t.Fatal(d)
		}
	}
	if d := (client.Backoff{}).Delay(0); d > 100*time.Millisecond || d < 75*time.Millisecond {
		t.Fatal(d)
	}
}

// A router that stops reading: Send blocks on the full queue (backpressure) until Close,
// which returns within its linger.
func TestFakeCloseUnblocksABlockedSend(t *testing.T) {
	r := newFakeRouter(t, token)
	release := make(chan struct{})
	defer close(release)
	r.onAccepted = func(*fakeConn) bool { <-release; return false }
	r.start()
	o := fastOpts()
	o.SendQueue = 1
	o.Linger = 200 * time.Millisecond
	src, err := client.ConnectSource(context.Background(), r.addr(), o)
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 900<<10)
	blocked := make(chan error, 1)
	go func() {
		for {
			if _, err := src.Send(1, payload); err != nil {
				blocked <- err
				return
			}
		}
	}()
	select {
	case err := <-blocked:
		t.Fatalf("send failed before blocking: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	start := time.Now()
	_ = src.Close()
	if err := <-blocked; !errors.Is(err, client.ErrClosed) {
		t.Fatal(err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("Close took %v", time.Since(start))
	}
}
