package client_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/y3-dev/y3/bindings/go/client"
)

// fakeRouter is a minimal in-process router for the tests that must run without the Rust
// binary, routing as spec/frames.md says: it checks the version and the token, answers a
// handshake ack, and delivers every data frame to every stream function observing its tag
// (the sender included; sources never), only to those wanting its yomo-target when it has
// one, merging the sender's yomo-wanted-target. Hooks let a test misbehave on purpose.
type fakeRouter struct {
	t     *testing.T
	ln    net.Listener
	token string

	// onAccepted, when set, runs after the ack is written; returning false ends the
	// connection.
	onAccepted func(c *fakeConn) bool
	// answer, when set, replaces the handshake's answer (nil: close at once).
	answer func(h client.Handshake) client.Frame

	mu         sync.Mutex
	conns      []*fakeConn
	handshakes []client.Handshake
	accepted   atomic.Int64
	dataIn     atomic.Int64
}

type fakeConn struct {
	c  net.Conn
	mu sync.Mutex
	h  client.Handshake
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

func (c *fakeConn) observes(tag uint32) bool {
	if c.h.ClientType != client.ClientStreamFunction {
		return false
	}
	for _, o := range c.h.Observed {
		if o == tag {
			return true
		}
	}
	return false
}

func newFakeRouter(t *testing.T, token string) *fakeRouter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &fakeRouter{t: t, ln: ln, token: token}
	t.Cleanup(r.close)
	return r
}

// subscribed reports whether a connection observing tag has been accepted.
func (r *fakeRouter) subscribed(tag uint32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		if c.observes(tag) {
			return true
		}
	}
	return false
}

func (r *fakeRouter) hellos() []client.Handshake {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]client.Handshake(nil), r.handshakes...)
}

func (r *fakeRouter) addr() string { return r.ln.Addr().String() }

func (r *fakeRouter) start() *fakeRouter {
	go func() {
		for {
			c, err := r.ln.Accept()
			if err != nil {
				return
			}
			go r.serve(&fakeConn{c: c})
		}
	}()
	return r
}

func (r *fakeRouter) close() {
	_ = r.ln.Close()
	r.dropAll()
}

// dropAll closes every connection (a crash, as the clients see it).
func (r *fakeRouter) dropAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		_ = c.c.Close()
	}
	r.conns = nil
}

func (r *fakeRouter) remove(c *fakeConn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, x := range r.conns {
		if x == c {
			r.conns = append(r.conns[:i], r.conns[i+1:]...)
			return
		}
	}
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
		_ = c.send(client.Rejected{Message: "expected a handshake", Code: client.CodeProtocolError})
		return
	}
	r.mu.Lock()
	r.handshakes = append(r.handshakes, h)
	r.mu.Unlock()
	var answer client.Frame = client.HandshakeAck{}
	switch {
	case h.Version != client.Version:
		answer = client.Rejected{Message: "version mismatch", Code: client.CodeVersionMismatch}
	case (h.AuthName != "token" && h.AuthName != "") || h.AuthPayload != r.token:
		answer = client.Rejected{Message: "invalid token", Code: client.CodeUnauthorized}
	}
	if r.answer != nil {
		answer = r.answer(h)
	}
	if answer == nil {
		return
	}
	if _, ok := answer.(client.HandshakeAck); ok {
		// Subscribed before the answer, as the router does.
		c.h = h
		r.mu.Lock()
		r.conns = append(r.conns, c)
		r.mu.Unlock()
		defer r.remove(c)
		r.accepted.Add(1)
	}
	if err := c.send(answer); err != nil {
		return
	}
	if _, ok := answer.(client.HandshakeAck); !ok {
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
		d, ok := f.(client.Data)
		if !ok {
			_ = c.send(client.Goaway{Message: "unexpected " + f.Type().String(), Code: client.CodeProtocolError})
			return
		}
		r.dataIn.Add(1)
		target, targeted := d.Metadata[client.MetaTarget]
		if h.WantedTarget != "" {
			d.Metadata[client.MetaWantedTarget] = h.WantedTarget
			d.RawMetadata = nil
		}
		b, _ := client.EncodeFrame(d, 0)
		r.mu.Lock()
		var subs []*fakeConn
		for _, s := range r.conns {
			if s.observes(d.Tag) && (!targeted || s.h.WantedTarget == target) {
				subs = append(subs, s)
			}
		}
		r.mu.Unlock()
		for _, s := range subs {
			_ = s.write(b)
		}
	}
}

func fastOpts() client.Options {
	return client.Options{Name: "t", Token: token, HandshakeTimeout: time.Second,
		Backoff: client.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond, Attempts: 3},
		Linger:  500 * time.Millisecond}
}

// waitFor polls cond for at most 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
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
	waitFor(t, "the function", func() bool { return r.subscribed(0x10) })
	src, err := client.ConnectSource(ctx, r.addr(), fastOpts())
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	payload := []byte("xabc")
	tids := make([]string, n)
	for i := range n {
		payload[0] = byte(i)
		tid, err := src.Send(0x10, payload) // payload reused: Send copies
		if err != nil {
			t.Fatal(err)
		}
		tids[i] = tid
	}
	// A frame as given: metadata and hops untouched.
	if err := src.SendData(ctx, client.Data{Tag: 0x10, Metadata: map[string]string{"k": "v"}, Payload: []byte{2}, Hops: 4}); err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	got := recvN(t, ctx, sink, n/2+1, 100*time.Millisecond)
	for i, d := range got[:n/2] {
		want := map[string]string{client.MetaSourceID: src.ID(), client.MetaTID: tids[2*i]}
		if d.Tag != 0x20 || d.Hops != 1 || !bytes.Equal(d.Payload, []byte{byte(2 * i), 'A', 'B', 'C'}) ||
			!maps.Equal(d.Metadata, want) {
			t.Fatalf("%d: %#v", i, d)
		}
		if m, err := client.DecodeMetadata(d.RawMetadata); err != nil || !maps.Equal(m, want) {
			t.Fatalf("%d: raw metadata %x", i, d.RawMetadata)
		}
	}
	if last := got[n/2]; !maps.Equal(last.Metadata, map[string]string{"k": "v"}) || last.Hops != 5 {
		t.Fatalf("%#v", last)
	}
	stopFn()
	if err := <-fnDone; err != nil {
		t.Fatal(err)
	}
	if _, err := src.Send(0x10, nil); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("send after close: %v", err)
	}
	// Handshakes: YoMo's client types and ids, the token as auth, y3's extension level.
	for _, h := range r.hellos() {
		cut := strings.LastIndexByte(h.ID, '-')
		base, counter := h.ID[:cut], h.ID[cut+1:]
		if len(base) != client.IDLen || counter != "0" || h.AuthName != "token" || h.AuthPayload != token ||
			h.Version != "2024-01-03" || h.ExtensionLevel != 1 || h.Name != "t" {
			t.Errorf("%#v", h)
		}
		switch {
		case h.ClientType == client.ClientSource && base == src.ID() && h.Observed == nil:
		case h.ClientType == client.ClientStreamFunction && base == sink.ID() && h.Observed[0] == 0x20:
		case h.ClientType == client.ClientStreamFunction && h.Observed[0] == 0x10:
		default:
			t.Errorf("%#v", h)
		}
	}
}

// yomo-target: a frame written with a target reaches only the functions wanting it; a
// function's output drops the target (and keeps the rest); the sender of a frame observing
// its tag receives it too.
func TestFakeTargetsAndSelfDelivery(t *testing.T) {
	r := newFakeRouter(t, token).start()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wants := func(target string) client.Options { o := fastOpts(); o.WantedTarget = target; return o }
	sinkA, err := client.ConnectSink(ctx, r.addr(), wants("a"), []uint32{0x10})
	if err != nil {
		t.Fatal(err)
	}
	defer sinkA.Close()
	sinkB, err := client.ConnectSink(ctx, r.addr(), wants("b"), []uint32{0x10})
	if err != nil {
		t.Fatal(err)
	}
	defer sinkB.Close()
	out, err := client.ConnectSink(ctx, r.addr(), fastOpts(), []uint32{0x11})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	// A function observing its own output tag 0x11 once (hops bound the loop here).
	fnCtx, stopFn := context.WithCancel(ctx)
	defer stopFn()
	fnDone := make(chan error, 1)
	go func() {
		fnDone <- client.RunStreamFunction(fnCtx, r.addr(), wants("a"), []uint32{0x10, 0x11},
			func(_ context.Context, in client.Data) (uint32, []byte, bool, error) {
				if in.Hops >= 2 {
					return 0, nil, false, nil
				}
				return 0x11, append([]byte("re:"), in.Payload...), true, nil
			})
	}()
	waitFor(t, "the function", func() bool { return r.accepted.Load() == 4 })
	src, err := client.ConnectSource(ctx, r.addr(), fastOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	tid, err := src.SendWithTarget(0x10, []byte("x"), "a")
	if err != nil {
		t.Fatal(err)
	}
	d, err := sinkA.Recv(ctx)
	want := map[string]string{client.MetaSourceID: src.ID(), client.MetaTID: tid, client.MetaTarget: "a"}
	if err != nil || !maps.Equal(d.Metadata, want) || string(d.Payload) != "x" {
		t.Fatalf("%#v %v", d, err)
	}
	// The function's outputs: hops 1 (from the source's frame) and hops 2 (from its own
	// output, delivered back to it); both without yomo-target, with its wanted target.
	for hops := uint32(1); hops <= 2; hops++ {
		d, err := out.Recv(ctx)
		want := map[string]string{client.MetaSourceID: src.ID(), client.MetaTID: tid, client.MetaWantedTarget: "a"}
		if err != nil || d.Hops != hops || !maps.Equal(d.Metadata, want) || !strings.HasPrefix(string(d.Payload), "re:") {
			t.Fatalf("%#v %v", d, err)
		}
	}
	qctx, qcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer qcancel()
	if d, err := sinkB.Recv(qctx); err == nil {
		t.Fatalf("sink b got %#v", d)
	}
	if d, err := out.Recv(qctx); err == nil {
		t.Fatalf("an extra output %#v", d)
	}
	// Reserved tags are refused before anything is sent.
	if _, err := src.Send(0xf000, nil); !errors.Is(err, client.ErrReservedTag) {
		t.Fatal(err)
	}
	if _, err := src.Send(0x10, nil); err != nil {
		t.Fatal(err)
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
	if !errors.As(err, &e) || e.Kind != client.KindUnauthorized || e.Code != client.CodeUnauthorized ||
		e.Reason != "invalid token" || e.Retryable() {
		t.Fatalf("%#v", err)
	}
	if len(r.hellos()) != 1 || time.Since(start) > time.Second {
		t.Fatal("retried")
	}
	// YoMo's rejection: no code.
	r.answer = func(client.Handshake) client.Frame { return client.Rejected{Message: "invalid token: guess"} }
	_, err = client.ConnectSink(context.Background(), r.addr(), o, []uint32{1})
	if !errors.As(err, &e) || e.Kind != client.KindRejected || e.Reason != "invalid token: guess" ||
		!errors.Is(err, client.ErrRejected) || len(r.hellos()) != 2 {
		t.Fatalf("%#v", err)
	}
	// A credential: split at the first ':'.
	r.answer = nil
	o.Token, o.Credential = "", "token:"+token
	src, err := client.ConnectSource(context.Background(), r.addr(), o)
	if err != nil {
		t.Fatal(err)
	}
	_ = src.Close()
	o.Credential = "jwt:a:b"
	_, _ = client.ConnectSource(context.Background(), r.addr(), o)
	o.Credential = "plain"
	_, _ = client.ConnectSource(context.Background(), r.addr(), o)
	hellos := r.hellos()
	for i, want := range [][2]string{{"token", token}, {"jwt", "a:b"}, {"", "plain"}} {
		h := hellos[2+i]
		if h.AuthName != want[0] || h.AuthPayload != want[1] {
			t.Errorf("%q: %q %q", want, h.AuthName, h.AuthPayload)
		}
	}
	// A frame that is not an answer.
	r.answer = func(h client.Handshake) client.Frame { return h }
	_, err = client.ConnectSink(context.Background(), r.addr(), fastOpts(), []uint32{1})
	if !errors.As(err, &e) || e.Kind != client.KindUnexpectedFrame || e.Found != "handshake" || e.Expected != "handshake_ack" {
		t.Fatalf("%#v", err)
	}
	// A retryable refusal (too many connections) is retried, then gave_up.
	r.answer = func(client.Handshake) client.Frame {
		return client.Rejected{Message: "full", Code: client.CodeTooManyConnections}
	}
	_, err = client.ConnectSource(context.Background(), r.addr(), fastOpts())
	if !errors.Is(err, client.ErrGaveUp) || !errors.Is(err, client.ErrTooManyConnections) {
		t.Fatalf("%v", err)
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
	// The message names the address, the cause, and what to try.
	for _, part := range []string{r.addr(), "after 3 attempts", "connection closed", "is it running"} {
		if !strings.Contains(err.Error(), part) {
			t.Fatalf("%q lacks %q", err, part)
		}
	}
	if attempts.Load() != 3 {
		t.Fatalf("%d attempts", attempts.Load())
	}
	// One id, a new reconnect counter per attempt.
	hellos := r.hellos()
	base := strings.TrimSuffix(hellos[0].ID, "-0")
	for i, h := range hellos {
		if h.ID != base+"-"+string(rune('0'+i)) {
			t.Fatalf("attempt %d: %q", i, h.ID)
		}
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

// A connect-to answer is followed at once; a redirection loop ends.
func TestFakeConnectTo(t *testing.T) {
	target := newFakeRouter(t, token).start()
	front := newFakeRouter(t, token)
	front.answer = func(client.Handshake) client.Frame { return client.ConnectTo{Endpoint: target.addr()} }
	front.start()
	o := fastOpts()
	o.Backoff.Attempts = 1
	src, err := client.ConnectSource(context.Background(), front.addr(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if len(front.hellos()) != 1 || target.accepted.Load() != 1 {
		t.Fatal(len(front.hellos()), target.accepted.Load())
	}
	front.answer = func(client.Handshake) client.Frame { return client.ConnectTo{Endpoint: front.addr()} }
	_, err = client.ConnectSource(context.Background(), front.addr(), o)
	var e *client.Error
	if !errors.As(err, &e) || e.Kind != client.KindUnexpectedFrame || e.Found != "connect_to" {
		t.Fatalf("%#v", err)
	}
}

// Data frames the router routes to a function before its ack arrives are delivered.
func TestFakeDataBeforeTheAck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		fc := &fakeConn{c: c}
		if _, err := client.NewFrameReader(c, 0).Next(); err != nil {
			return
		}
		_ = fc.send(client.Data{Tag: 1, Payload: []byte("early")})
		_ = fc.send(client.HandshakeAck{})
		_ = fc.send(client.Data{Tag: 1, Payload: []byte("late")})
		time.Sleep(time.Second)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sink, err := client.ConnectSink(ctx, ln.Addr().String(), fastOpts(), []uint32{1})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	for _, want := range []string{"early", "late"} {
		d, err := sink.Recv(ctx)
		if err != nil || string(d.Payload) != want {
			t.Fatalf("%q %v, want %q", d.Payload, err, want)
		}
	}
}

// A goaway with a retryable code is not an error: Send goes on, reconnecting on the next
// connection with the next reconnect counter.
func TestFakeSourceGoawayThenReconnect(t *testing.T) {
	r := newFakeRouter(t, token)
	var first atomic.Bool
	r.onAccepted = func(c *fakeConn) bool {
		if first.CompareAndSwap(false, true) {
			_ = c.send(client.Goaway{Code: client.CodeShuttingDown, Message: "bye"})
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
	for range 1000 {
		if _, err := src.Send(1, []byte("x")); err != nil {
			t.Fatalf("%#v", err)
		}
		if len(r.hellos()) == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if seen.Load() != 1 {
		t.Fatalf("%d goaways seen", seen.Load())
	}
	if _, err := src.Send(1, []byte("y")); err != nil {
		t.Fatal(err)
	}
	if err := src.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	hellos := r.hellos()
	if len(hellos) != 2 || hellos[0].ID != src.ID()+"-0" || hellos[1].ID != src.ID()+"-1" {
		t.Fatalf("%#v", hellos)
	}
}

// A refusal after the handshake that is not retryable (a rejected frame, a goaway whose
// code says so) ends every client for good.
func TestFakeRefusalAfterTheHandshakeIsFinal(t *testing.T) {
	for _, c := range []struct {
		frame client.Frame
		kind  client.Kind
	}{
		{client.Goaway{Code: client.CodeReservedTag, Message: "reserved"}, client.KindReservedTag},
		{client.Rejected{Message: "go away"}, client.KindRejected},
		{client.Rejected{Message: "no", Code: client.CodeProtocolError}, client.KindProtocolError},
	} {
		r := newFakeRouter(t, token)
		r.onAccepted = func(fc *fakeConn) bool {
			_ = fc.send(c.frame)
			time.Sleep(50 * time.Millisecond)
			return false
		}
		r.start()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		src, err := client.ConnectSource(ctx, r.addr(), fastOpts())
		if err != nil {
			t.Fatal(err)
		}
		var sendErr error
		for sendErr == nil && ctx.Err() == nil {
			_, sendErr = src.Send(1, []byte("x"))
			time.Sleep(time.Millisecond)
		}
		for range 3 {
			if client.KindOf(sendErr) != c.kind {
				t.Fatalf("%#v: source: %v", c.frame, sendErr)
			}
			_, sendErr = src.Send(1, []byte("x"))
		}
		_ = src.Close()

		sink, err := client.ConnectSink(ctx, r.addr(), fastOpts(), []uint32{1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sink.Recv(ctx); client.KindOf(err) != c.kind || client.KindOf(sink.Err()) != c.kind {
			t.Fatalf("%#v: sink: %v", c.frame, err)
		}
		err = client.RunStreamFunction(ctx, r.addr(), fastOpts(), []uint32{1},
			func(context.Context, client.Data) (uint32, []byte, bool, error) { return 0, nil, false, nil })
		if client.KindOf(err) != c.kind {
			t.Fatalf("%#v: function: %v", c.frame, err)
		}
		if n := len(r.hellos()); n != 3 {
			t.Fatalf("%#v: %d handshakes: retried", c.frame, n)
		}
		cancel()
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
			_ = c.send(client.Data{Tag: 1, Payload: []byte("one")})
			return false // dropped
		case 2:
			// A data frame declaring 32 MiB, over DefaultMaxFrameLen (16 MiB + 64 KiB):
			// refused from its header.
			_ = c.write([]byte{0xbf, 0x90, 0x80, 0x80, 0x00})
			_ = c.write(bytes.Repeat([]byte{0}, 1000))
			return true
		case 3:
			// Metadata that is not a string map: the connection is ended.
			_ = c.write(unhex(t, "bf0b 010101 0303 81a001 020178"))
			return true
		default:
			_ = c.send(client.Data{Tag: 1, Payload: []byte("four")})
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
	for _, want := range []string{"one", "four"} {
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
	waitFor(t, "the frame", func() bool { return r.dataIn.Load() >= 1 })
	if len(r.hellos()) != 1 || r.dataIn.Load() != 1 {
		t.Fatal(len(r.hellos()), r.dataIn.Load())
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
