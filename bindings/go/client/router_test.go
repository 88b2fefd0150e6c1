package client_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	y3 "github.com/y3-dev/y3/bindings/go"
	"github.com/y3-dev/y3/bindings/go/client"
	"github.com/y3-dev/y3/bindings/go/client/quicdial"
)

// Integration tests against `y3 serve` (see router_harness_test.go), written to
// spec/frames.md: YoMo v1.22's frames, routing to every function observing a tag (the
// sender included), sources never receiving, y3 codes for clients at extension level 1.

const token = "secret"

func opts(name string) client.Options {
	return client.Options{Name: name, Token: token, HandshakeTimeout: 3 * time.Second}
}

// runPipeline runs Go source → Go stream function → Go sink through the router at the
// given addresses and checks that every frame arrives exactly once, in order, with its
// metadata: n readings on 0x10 (seen by a second sink too), one alert on 0x20 per loud
// reading carrying the reading's yomo-tid.
func runPipeline(t *testing.T, n int, srcAddr, fnAddr, sinkAddr string, srcOpts, fnOpts, sinkOpts client.Options) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()

	alertSink, err := client.ConnectSink(ctx, sinkAddr, sinkOpts, []uint32{alerts})
	if err != nil {
		t.Fatal(err)
	}
	defer alertSink.Close()
	readingSink, err := client.ConnectSink(ctx, sinkAddr, sinkOpts, []uint32{readings})
	if err != nil {
		t.Fatal(err)
	}
	defer readingSink.Close()

	fn, err := client.ConnectStreamFunction(ctx, fnAddr, fnOpts, []uint32{readings})
	if err != nil {
		t.Fatal(err)
	}
	fnCtx, stopFn := context.WithCancel(ctx)
	fnDone := make(chan error, 1)
	go func() { fnDone <- fn.Serve(fnCtx, noiseAlert(t)) }()

	src, err := client.ConnectSource(ctx, srcAddr, srcOpts)
	if err != nil {
		t.Fatal(err)
	}
	s := sensor(0x59332021)
	var tids []string
	var loud []string
	sent := map[string]NoiseData{}
	for i := range n {
		reading := NoiseData{Noise: s.read(), Time: 1600000000000 + int64(i), From: "go-sensor"}
		tid, err := src.SendMarshal(readings, reading)
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if _, dup := sent[tid]; dup || len(tid) != client.IDLen {
			t.Fatalf("tid %q", tid)
		}
		sent[tid] = reading
		tids = append(tids, tid)
		if reading.Noise > threshold {
			loud = append(loud, tid)
		}
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}

	// Per producer and consumer the order is the wire order.
	got := recvN(t, ctx, readingSink, n, 200*time.Millisecond)
	for i, d := range got {
		var back NoiseData
		if err := y3.Unmarshal(d.Payload, readings, &back); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{client.MetaSourceID: src.ID(), client.MetaTID: tids[i]}
		if d.Tag != readings || d.Hops != 0 || back != sent[tids[i]] || !maps.Equal(d.Metadata, want) {
			t.Fatalf("reading %d: %#v %#v", i, d, back)
		}
	}
	got = recvN(t, ctx, alertSink, len(loud), 300*time.Millisecond)
	for i, d := range got {
		want := map[string]string{client.MetaSourceID: src.ID(), client.MetaTID: loud[i]}
		if d.Tag != alerts || d.Hops != 1 || !maps.Equal(d.Metadata, want) {
			t.Fatalf("alert %d: %#v, want the reading %s", i, d, loud[i])
		}
		p, ok, err := y3.Get(d.Payload, alerts, 0x21)
		if err != nil || !ok {
			t.Fatal(err)
		}
		if v, _ := p.Float32(); v != sent[loud[i]].Noise {
			t.Fatalf("alert %d: %v, want %v", i, v, sent[loud[i]].Noise)
		}
	}
	t.Logf("%d readings, %d alerts, each delivered exactly once", n, len(got))

	stopFn()
	select {
	case err := <-fnDone:
		if err != nil {
			t.Fatalf("function: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the function did not stop")
	}
}

// Go source → Go stream function → Go sinks over TCP, with a token.
func TestRouterPipelineTCP(t *testing.T) {
	r := startRouter(t, routerOpts{token: token})
	runPipeline(t, 3000, r.tcp, r.tcp, r.tcp, opts("noise-sensor"), opts("noise-alert"), opts("alert-printer"))
}

// The same over TLS 1.3 (ALPN yomo) on the TCP listener, trusting the router's dev
// certificate three ways (CA pool, pinned, insecure); an untrusted certificate is a tls
// error, not retried.
func TestRouterPipelineTLS(t *testing.T) {
	r := startRouter(t, routerOpts{token: token, tls: true})
	pool, err := client.TLSConfigFromPEM(r.certPEM())
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := client.PinnedTLSConfig(r.certPEM())
	if err != nil {
		t.Fatal(err)
	}
	with := func(name string, c *tls.Config) client.Options { o := opts(name); o.TLS = c; return o }
	runPipeline(t, 500, r.tcp, r.tcp, r.tcp,
		with("tls-source", pool), with("tls-function", pinned), with("tls-sink", client.InsecureTLSConfig()))

	// A certificate we do not trust: refused by the TLS handshake at once.
	other, err := client.TLSConfigFromPEM(selfSignedPEM(t))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = client.ConnectSource(context.Background(), r.tcp, with("untrusting", other))
	if client.KindOf(err) != client.KindTLS || client.Retryable(err) {
		t.Fatalf("%v", err)
	}
	wrongPin, _ := client.PinnedTLSConfig(selfSignedPEM(t))
	_, err = client.ConnectSource(context.Background(), r.tcp, with("wrong-pin", wrongPin))
	if !errors.Is(err, client.ErrTLS) {
		t.Fatalf("%v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("tls refusals were retried: %v", time.Since(start))
	}
}

// QUIC via quic-go: a QUIC source and sink, a TCP function in between; a wrong token over
// QUIC is refused with a typed error too.
func TestRouterPipelineQUIC(t *testing.T) {
	r := startRouter(t, routerOpts{token: token})
	pool, err := client.TLSConfigFromPEM(r.certPEM())
	if err != nil {
		t.Fatal(err)
	}
	q := func(name string) client.Options { o := opts(name); o.Dialer = quicdial.New(pool); return o }
	runPipeline(t, 1000, r.quic, r.tcp, r.quic, q("quic-source"), opts("tcp-function"), q("quic-sink"))

	bad := q("quic-guess")
	bad.Token = "guess"
	if _, err := client.ConnectSink(context.Background(), r.quic, bad, []uint32{1}); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("%v", err)
	}
}

// A wrong token is refused with the typed unauthorized error (y3 code 2), at once (not
// retried), for every client type; the refusal does not repeat the offered token.
func TestRouterWrongToken(t *testing.T) {
	r := startRouter(t, routerOpts{token: token})
	ctx := context.Background()
	bad := opts("guesser")
	bad.Token = "guess-the-token"
	start := time.Now()
	_, err := client.ConnectSource(ctx, r.tcp, bad)
	var e *client.Error
	if !errors.As(err, &e) || e.Kind != client.KindUnauthorized || e.Code != client.CodeUnauthorized ||
		!errors.Is(err, client.ErrUnauthorized) || e.Retryable() || strings.Contains(e.Reason, bad.Token) {
		t.Fatalf("%#v", err)
	}
	if _, err := client.ConnectStreamFunction(ctx, r.tcp, bad, []uint32{1}); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatal(err)
	}
	if _, err := client.ConnectSink(ctx, r.tcp, bad, []uint32{1}); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatal(err)
	}
	noToken := bad
	noToken.Token = ""
	if _, err := client.ConnectSource(ctx, r.tcp, noToken); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatal(err)
	}
	wrongName := bad
	wrongName.Token, wrongName.Credential = "", "jwt:"+token
	if _, err := client.ConnectSource(ctx, r.tcp, wrongName); client.Retryable(err) || err == nil {
		t.Fatalf("an unknown auth name: %v", err)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Fatalf("refusals took %v: retried?", elapsed)
	}
	// The right token works, as a token or as YoMo's credential.
	for _, o := range []client.Options{opts("ok"), {Name: "ok", Credential: "token:" + token}} {
		src, err := client.ConnectSource(ctx, r.tcp, o)
		if err != nil {
			t.Fatal(err)
		}
		_ = src.Close()
	}
}

// Content filters (spec/filters.md): a sink with Options.Filter gets exactly the loud
// readings, in order, while a plain sink gets them all; a filter that does not compile is
// refused with bad_filter, not retried.
func TestRouterFilter(t *testing.T) {
	r := startRouter(t, routerOpts{token: token})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	loudOpts := opts("loud-recorder")
	loudOpts.Filter = fmt.Sprintf("0x10/0x11:f32 > %d", threshold)
	loudSink, err := client.ConnectSink(ctx, r.tcp, loudOpts, []uint32{readings})
	if err != nil {
		t.Fatal(err)
	}
	defer loudSink.Close()
	allSink, err := client.ConnectSink(ctx, r.tcp, opts("all"), []uint32{readings})
	if err != nil {
		t.Fatal(err)
	}
	defer allSink.Close()
	src, err := client.ConnectSource(ctx, r.tcp, opts("noise-sensor"))
	if err != nil {
		t.Fatal(err)
	}
	s := sensor(0x59332021)
	var loud []string
	const n = 300
	for i := range n {
		reading := NoiseData{Noise: s.read(), Time: int64(i), From: "go-sensor"}
		tid, err := src.SendMarshal(readings, reading)
		if err != nil {
			t.Fatal(err)
		}
		if reading.Noise > threshold {
			loud = append(loud, tid)
		}
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	recvN(t, ctx, allSink, n, 100*time.Millisecond)
	got := recvN(t, ctx, loudSink, len(loud), 200*time.Millisecond)
	for i, d := range got {
		if d.Metadata[client.MetaTID] != loud[i] {
			t.Fatalf("loud reading %d: %s, want %s", i, d.Metadata[client.MetaTID], loud[i])
		}
	}
	if len(loud) == 0 || len(loud) == n {
		t.Fatalf("%d of %d loud: the filter was not tested", len(loud), n)
	}
	bad := opts("bad-filter")
	bad.Filter = "0x10/0x11 > 60.5"
	_, err = client.ConnectSink(ctx, r.tcp, bad, []uint32{readings})
	var e *client.Error
	if !errors.As(err, &e) || !errors.Is(err, client.ErrBadFilter) || e.Code != client.CodeBadFilter ||
		e.Retryable() || !strings.HasPrefix(e.Reason, "filter_untyped_float") {
		t.Fatalf("%#v", err)
	}
}

// Router shutdown: the source, the sink and the function see the goaway and, the router
// being gone, give up reconnecting (gave_up, as they were told to after 3 attempts).
func TestRouterShutdown(t *testing.T) {
	r := startRouter(t, routerOpts{token: token})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var mu sync.Mutex
	goaways := map[string]client.Code{}
	o := func(name string) client.Options {
		o := opts(name)
		o.Backoff = client.Backoff{Initial: 50 * time.Millisecond, Attempts: 3}
		o.OnGoaway = func(g client.Goaway) {
			mu.Lock()
			goaways[name] = g.Code
			mu.Unlock()
		}
		return o
	}
	sink, err := client.ConnectSink(ctx, r.tcp, o("sink"), []uint32{readings})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	fn, err := client.ConnectStreamFunction(ctx, r.tcp, o("function"), []uint32{readings})
	if err != nil {
		t.Fatal(err)
	}
	fnDone := make(chan error, 1)
	go func() {
		fnDone <- fn.Serve(ctx, func(context.Context, client.Data) (uint32, []byte, bool, error) {
			return 0, nil, false, nil
		})
	}()
	src, err := client.ConnectSource(ctx, r.tcp, o("source"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for range 10 {
		if _, err := src.Send(readings, []byte("before")); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	recvN(t, ctx, sink, 10, 50*time.Millisecond)

	r.terminate()
	// The source is told first (OnGoaway); it keeps sending, and once the router is gone
	// its reconnection gives up (Attempts: 3).
	var sendErr error
	for sendErr == nil && ctx.Err() == nil {
		_, sendErr = src.Send(readings, []byte("during"))
		time.Sleep(5 * time.Millisecond)
	}
	var e *client.Error
	if !errors.As(sendErr, &e) || e.Kind != client.KindGaveUp || e.Addr != r.tcp {
		t.Fatalf("source: %#v", sendErr)
	}
	if err := r.wait(10 * time.Second); err != nil {
		t.Fatalf("router exit: %v", err)
	}
	// The sink's channel closes once reconnecting gives up.
	for {
		if _, err := sink.Recv(ctx); err != nil {
			if !errors.Is(err, client.ErrGaveUp) || !errors.Is(sink.Err(), client.ErrGaveUp) {
				t.Fatalf("sink: %v", err)
			}
			break
		}
	}
	select {
	case err := <-fnDone:
		if !errors.Is(err, client.ErrGaveUp) {
			t.Fatalf("function: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("function still serving")
	}
	// The next send reconnects, and there is nobody there.
	if _, err := src.Send(readings, []byte("after")); !errors.Is(err, client.ErrGaveUp) {
		t.Fatalf("source after shutdown: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range []string{"source", "sink", "function"} {
		if goaways[name] != client.CodeShuttingDown {
			t.Errorf("%s saw goaway %v", name, goaways)
		}
	}
}

// A router restart after an outage: with the default attempts (forever) the sink, the
// function and the source reconnect to the new router on the same port and the pipeline
// flows again, though the outage spans ~30 attempts (the old default gave up after 10);
// no Send fails.
func TestRouterRestartReconnect(t *testing.T) {
	first := startRouter(t, routerOpts{token: token})
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	o := opts("restart")
	o.Backoff = client.Backoff{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond}
	sink, err := client.ConnectSink(ctx, first.tcp, o, []uint32{alerts})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	fnDone := make(chan error, 1)
	go func() {
		fnDone <- client.RunStreamFunction(ctx, first.tcp, o, []uint32{readings},
			func(_ context.Context, in client.Data) (uint32, []byte, bool, error) {
				return alerts, append([]byte("seen:"), in.Payload...), true, nil
			})
	}()
	src, err := client.ConnectSource(ctx, first.tcp, o)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	// Wait for the function to be subscribed: send until an alert comes back.
	roundTrip := func(payload string) {
		t.Helper()
		for {
			if _, err := src.Send(readings, []byte(payload)); err != nil {
				t.Fatal(err)
			}
			rctx, rcancel := context.WithTimeout(ctx, 100*time.Millisecond)
			d, err := sink.Recv(rctx)
			rcancel()
			if err == nil && string(d.Payload) == "seen:"+payload {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("no round trip of %q", payload)
			}
		}
	}
	roundTrip("one")

	first.terminate()
	if err := first.wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the outage
	second := startRouter(t, routerOpts{token: token, tcp: first.tcp})
	if second.tcp != first.tcp {
		t.Fatalf("%s != %s", second.tcp, first.tcp)
	}
	// Only the new router can carry this one: the sink and the function reconnected.
	roundTrip("two")
	cancel()
	if err := <-fnDone; err != nil {
		t.Fatal(err)
	}
}

// Routing (spec/frames.md, Routing): every function observing a tag gets every frame;
// yomo-target selects the functions wanting it (and is dropped for tag 0xe001); the
// sender's wanted target is merged into its frames; sources never receive; a loop of y3
// functions stops at the router's hop limit.
func TestRouterRouting(t *testing.T) {
	r := startRouter(t, routerOpts{token: token})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	wants := func(name, target string) client.Options { o := opts(name); o.WantedTarget = target; return o }
	sinkA, err := client.ConnectSink(ctx, r.tcp, wants("sink-a", "a"), []uint32{readings, 0xe001})
	if err != nil {
		t.Fatal(err)
	}
	defer sinkA.Close()
	sinkB, err := client.ConnectSink(ctx, r.tcp, wants("sink-b", "b"), []uint32{readings, 0xe001})
	if err != nil {
		t.Fatal(err)
	}
	defer sinkB.Close()
	plain, err := client.ConnectSink(ctx, r.tcp, opts("plain"), []uint32{readings, alerts})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	src, err := client.ConnectSource(ctx, r.tcp, opts("source"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()

	// Broadcast: every function observing the tag, without a target.
	tid, err := src.Send(readings, []byte("all"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*client.Sink{sinkA, sinkB, plain} {
		d, err := s.Recv(ctx)
		if err != nil || string(d.Payload) != "all" || d.Metadata[client.MetaTID] != tid {
			t.Fatalf("%#v %v", d, err)
		}
	}
	// A target: only sink a.
	tid, err = src.SendWithTarget(readings, []byte("for-a"), "a")
	if err != nil {
		t.Fatal(err)
	}
	d, err := sinkA.Recv(ctx)
	want := map[string]string{client.MetaSourceID: src.ID(), client.MetaTID: tid, client.MetaTarget: "a"}
	if err != nil || string(d.Payload) != "for-a" || !maps.Equal(d.Metadata, want) {
		t.Fatalf("%#v %v", d, err)
	}
	// Tag 0xe001 (YoMo's reducer tag): the target is dropped, every observer gets it.
	if err := src.SendData(ctx, client.Data{Tag: 0xe001, Metadata: map[string]string{client.MetaTarget: "a", "k": "v"},
		Payload: []byte("reduced")}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*client.Sink{sinkA, sinkB} {
		d, err := s.Recv(ctx)
		if err != nil || d.Tag != 0xe001 || !maps.Equal(d.Metadata, map[string]string{"k": "v"}) {
			t.Fatalf("%#v %v", d, err)
		}
	}
	qctx, qcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	for _, s := range []*client.Sink{sinkB, plain} {
		if d, err := s.Recv(qctx); err == nil {
			t.Fatalf("unexpected %#v", d)
		}
	}
	qcancel()

	// A function wanting "w": its outputs carry yomo-wanted-target w; hops count.
	fnCtx, stopFn := context.WithCancel(ctx)
	defer stopFn()
	go func() {
		_ = client.RunStreamFunction(fnCtx, r.tcp, wants("fn-w", "w"), []uint32{readings},
			func(_ context.Context, in client.Data) (uint32, []byte, bool, error) {
				return alerts, append([]byte("re:"), in.Payload...), true, nil
			})
	}()
	for {
		tid, err = src.SendWithTarget(readings, []byte("for-w"), "w")
		if err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		d, err = plain.Recv(rctx)
		rcancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the function never answered")
		}
	}
	want = map[string]string{client.MetaSourceID: src.ID(), client.MetaTID: tid, client.MetaWantedTarget: "w"}
	if d.Tag != alerts || d.Hops != 1 || string(d.Payload) != "re:for-w" || !maps.Equal(d.Metadata, want) {
		t.Fatalf("%#v", d)
	}
	stopFn()

	// A loop: a function writing the tag it observes, through the router, until the hop
	// limit drops the frame. The sender receives its own frames.
	loopTag := uint32(0x30)
	seen, err := client.ConnectSink(ctx, r.tcp, opts("loop-watch"), []uint32{loopTag})
	if err != nil {
		t.Fatal(err)
	}
	defer seen.Close()
	loopCtx, stopLoop := context.WithCancel(ctx)
	defer stopLoop()
	go func() {
		_ = client.RunStreamFunction(loopCtx, r.tcp, opts("loop"), []uint32{loopTag},
			func(_ context.Context, in client.Data) (uint32, []byte, bool, error) {
				return loopTag, in.Payload, true, nil
			})
	}()
	var hops []uint32
	for !slices.ContainsFunc(hops, func(h uint32) bool { return h > 0 }) {
		if _, err := src.Send(loopTag, []byte("loop")); err != nil {
			t.Fatal(err)
		}
		for {
			rctx, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
			d, err := seen.Recv(rctx)
			rcancel()
			if err != nil {
				break
			}
			hops = append(hops, d.Hops)
		}
		if ctx.Err() != nil {
			t.Fatal("the loop function never answered")
		}
	}
	// The first probes may have gone out before the function subscribed: look at the last
	// run, which counts up from 0 without a gap and stops.
	last := 0
	for i, h := range hops {
		if h == 0 {
			last = i
		}
	}
	for i, h := range hops[last:] {
		if h != uint32(i) {
			t.Fatalf("hops %v", hops[last:])
		}
	}
	if n := len(hops) - last; n < 2 || n > 1000 {
		t.Fatalf("the loop ran %d times", n)
	}
	t.Logf("the loop stopped after %d hops", len(hops)-last-1)
}

// rawConn is a TCP connection speaking frames by hand, keeping the exact bytes read.
type rawConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}
}

func (rc *rawConn) write(b []byte) {
	if _, err := rc.c.Write(b); err != nil {
		rc.t.Fatal(err)
	}
}

func (rc *rawConn) send(f client.Frame) []byte {
	b, err := client.EncodeFrame(f, 0)
	if err != nil {
		rc.t.Fatal(err)
	}
	rc.write(b)
	return b
}

// hello is a raw handshake: level 1 unless level0, with the given client type and token.
func hello(typ client.ClientType, tok string, level0 bool, observed ...uint32) client.Handshake {
	h := client.Handshake{Name: "raw", ID: client.NewID() + "-0", ClientType: typ, Observed: observed,
		AuthName: "token", AuthPayload: tok, Version: client.Version, ExtensionLevel: client.ExtensionLevel}
	if level0 {
		h.ExtensionLevel = 0
	}
	return h
}

// next reads one frame's exact bytes off the wire (header, then body), decodes them, and
// checks that the Go encoder writes the very same bytes for the decoded frame.
func (rc *rawConn) next() ([]byte, client.Frame) {
	rc.t.Helper()
	raw, f, err := rc.tryNext()
	if err != nil {
		rc.t.Fatalf("read: %v", err)
	}
	return raw, f
}

func (rc *rawConn) tryNext() ([]byte, client.Frame, error) {
	rc.t.Helper()
	head := []byte{}
	b, err := rc.r.ReadByte()
	if err != nil {
		return nil, nil, err
	}
	head = append(head, b)
	var n int
	for {
		c, err := rc.r.ReadByte()
		if err != nil {
			return nil, nil, err
		}
		head = append(head, c)
		n = n<<7 | int(c&0x7f)
		if c&0x80 == 0 {
			break
		}
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(rc.r, body); err != nil {
		return nil, nil, err
	}
	raw := append(head, body...)
	f, err := client.DecodeFrame(raw, 0)
	if err != nil {
		rc.t.Fatalf("decoding the router's % x: %v", raw, err)
	}
	again, err := client.EncodeFrame(f, 0)
	if err != nil || !bytes.Equal(again, raw) {
		rc.t.Fatalf("the router wrote % x, Go encodes %#v as % x", raw, f, again)
	}
	return raw, f, nil
}

// closed reads until the router ends the connection, returning the frames it sent first.
func (rc *rawConn) closed() []client.Frame {
	rc.t.Helper()
	var frames []client.Frame
	for {
		_, f, err := rc.tryNext()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				rc.t.Fatalf("the router did not close the connection (after %#v)", frames)
			}
			return frames
		}
		frames = append(frames, f)
	}
}

// The router's frames, byte for byte, on a raw TCP connection.
func TestRouterRawFrames(t *testing.T) {
	r := startRouter(t, routerOpts{token: token})
	bin := findRouter(t)

	// Handshake → ack, exactly a9 00.
	rc := dialRaw(t, r.tcp)
	rc.send(hello(client.ClientStreamFunction, token, false, readings, 0x200))
	if raw, _ := rc.next(); !bytes.Equal(raw, []byte{0xa9, 0x00}) {
		t.Fatalf("% x", raw)
	}

	// Data frames from the Rust source `y3 send`, as the router forwards them.
	lines := `{"tag":16,"node":[{"tag":17,"float32":40},{"tag":18,"int64":1600000000000},{"tag":19,"string":"127.0.0.1"}]}
{"tag":"0x10","payload_hex":"00ff"}
{"tag":512,"payload_hex":""}
`
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	send := exec.CommandContext(ctx, bin, "send", "--addr", r.tcp, "--token", token, "--tag", "0x10")
	send.Stdin = strings.NewReader(lines)
	if out, err := send.CombinedOutput(); err != nil {
		t.Fatalf("y3 send: %v\n%s", err, out)
	}
	wantPayloads := []string{"9017110242201206aec8bbba800013093132372e302e302e31", "00ff", ""}
	wantTags := []uint32{readings, readings, 0x200}
	for i := range wantPayloads {
		raw, f := rc.next()
		d, ok := f.(client.Data)
		if !ok || d.Tag != wantTags[i] || d.Hops != 0 || fmt.Sprintf("%x", d.Payload) != wantPayloads[i] {
			t.Fatalf("frame %d: % x %#v", i, raw, f)
		}
	}

	// A function receives its own frames, as the bytes it sent (nothing to merge).
	sent := rc.send(client.Data{Tag: 0x200, Metadata: map[string]string{"k": "v"}, Payload: []byte("echo"), Hops: 3})
	if raw, _ := rc.next(); !bytes.Equal(raw, sent) {
		t.Fatalf("own frame: % x, sent % x", raw, sent)
	}

	// A source observing tags receives nothing.
	src := dialRaw(t, r.tcp)
	src.send(hello(client.ClientSource, token, false, 0x200))
	src.next()
	src.send(client.Data{Tag: 0x200, Payload: []byte("from-source")})
	if _, f := rc.next(); f.(client.Data).Tag != 0x200 || string(f.(client.Data).Payload) != "from-source" {
		t.Fatalf("%#v", f)
	}
	_ = src.c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, f, err := src.tryNext(); err == nil {
		t.Fatalf("a source received %#v", f)
	}

	// A wrong token, for a y3 client: spec/frames.md's bytes, then the end.
	rc = dialRaw(t, r.tcp)
	rc.send(hello(client.ClientSource, "guess", false))
	raw, _ := rc.next()
	if want := unhex(t, "b912 010d 696e76616c696420746f6b656e 300102"); !bytes.Equal(raw, want) {
		t.Fatalf("% x, want % x", raw, want)
	}
	rc.closed()
	// For a YoMo client (extension level 0): what YoMo's zipper sends, no y3 code, and not
	// the offered token.
	rc = dialRaw(t, r.tcp)
	rc.send(hello(client.ClientSource, "guess-the-token", true))
	if _, f := rc.next(); f.(client.Rejected).HasCode || strings.Contains(f.(client.Rejected).Message, "guess-the-token") {
		t.Errorf("a y3 code for a YoMo client: %#v", f)
	}

	// Refused handshakes: the code, then the end.
	refused := []struct {
		name  string
		wire  []byte
		codes []client.Code
	}{
		{"version", mustEncode(t, func() client.Handshake {
			h := hello(client.ClientSource, token, false)
			h.Version = "2023-01-01"
			return h
		}()), []client.Code{client.CodeVersionMismatch}},
		// An empty client type (it crashes YoMo's zipper): 02 00 instead of 02 01 5f.
		{"empty client type", emptyClientType(t), []client.Code{client.CodeBadHandshake, client.CodeProtocolError}},
		{"data first", mustEncode(t, client.Data{Tag: 1, Payload: []byte{}}), []client.Code{client.CodeProtocolError}},
	}
	for _, c := range refused {
		rc := dialRaw(t, r.tcp)
		rc.write(c.wire)
		frames := rc.closed()
		if len(frames) > 1 {
			t.Fatalf("%s: %#v", c.name, frames)
		}
		if len(frames) == 1 {
			rj, ok := frames[0].(client.Rejected)
			if !ok || (rj.HasCode && !containsCode(c.codes, rj.Code)) {
				t.Errorf("%s: %#v", c.name, frames[0])
			}
		}
	}

	// Bytes that are not frames: the connection ends (after at most one rejected or goaway
	// frame, which decodes).
	for _, h := range []string{
		"474554202f20485454502f312e310d0a", // GET / HTTP/1.1
		"1001",
		"a0ff",
		"bf7f",
		"bf87ffffff7f",
		"b000", // y3's old goaway
		"b106010101020101",
	} {
		rc := dialRaw(t, r.tcp)
		rc.write(unhex(t, h))
		if frames := rc.closed(); len(frames) > 1 {
			t.Errorf("%s: %#v", h, frames)
		}
	}

	// After the handshake: a reserved tag, a second handshake, bad metadata. A y3 client
	// gets a goaway with the code, then the end.
	after := []struct {
		name string
		wire []byte
		code client.Code
	}{
		{"reserved tag", mustEncode(t, client.Data{Tag: 0xf000, Payload: []byte{}}), client.CodeReservedTag},
		{"second handshake", mustEncode(t, hello(client.ClientSource, token, false)), client.CodeProtocolError},
		{"bad metadata", unhex(t, "bf0b 010110 0303 81a001 020178"), client.CodeProtocolError},
	}
	for _, c := range after {
		rc := dialRaw(t, r.tcp)
		rc.send(hello(client.ClientSource, token, false))
		rc.next()
		rc.write(c.wire)
		frames := rc.closed()
		if len(frames) != 1 {
			t.Fatalf("%s: %#v", c.name, frames)
		}
		g, ok := frames[0].(client.Goaway)
		if !ok || g.Code != c.code || !g.HasCode {
			t.Errorf("%s: %#v", c.name, frames[0])
		}
	}
}

// emptyClientType is a valid level-1 source handshake whose client type field is empty.
func emptyClientType(t *testing.T) []byte {
	h := hello(client.ClientSource, token, false)
	h.ID = "a-0"
	full := mustEncode(t, h)
	p, err := y3.ConfigFor(y3.NVarInt).Decode(full)
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Replace(p.Value(), []byte{0x02, 0x01, 0x5f}, []byte{0x02, 0x00}, 1)
	out, err := y3.AppendHeader(nil, y3.NVarInt, y3.NodeTag(uint32(client.TypeHandshake)), len(body))
	if err != nil {
		t.Fatal(err)
	}
	return append(out, body...)
}

func containsCode(codes []client.Code, c client.Code) bool {
	for _, x := range codes {
		if x == c {
			return true
		}
	}
	return false
}

func mustEncode(t *testing.T, f client.Frame) []byte {
	b, err := client.EncodeFrame(f, 0)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Mixed pipelines: a Go source feeding the Rust sink `y3 observe` (which reads the Go
// payload with the Rust observer), and the Rust source `y3 send` feeding a Go stream
// function and a Go sink.
func TestRouterMixedWithRustClients(t *testing.T) {
	r := startRouter(t, routerOpts{token: token})
	bin := findRouter(t)
	ctx, cancel := context.WithTimeout(context.Background(), 18*time.Second)
	defer cancel()

	t.Run("go source to y3 observe", func(t *testing.T) {
		observe := exec.CommandContext(ctx, bin, "observe", "--addr", r.tcp, "--token", token, "--tag", "0x10",
			"--path", "0x10/0x11", "--as", "float32", "--idle-exit-ms", "1500")
		stdout, err := observe.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr syncBuffer
		observe.Stderr = &stderr
		if err := observe.Start(); err != nil {
			t.Fatal(err)
		}
		type line struct {
			Tag   uint32   `json:"tag"`
			Hops  uint32   `json:"hops"`
			Value *float32 `json:"value"`
		}
		lines := make(chan line, 4096)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				var l line
				if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
					t.Errorf("%q: %v", sc.Text(), err)
					continue
				}
				lines <- l
			}
		}()
		src, err := client.ConnectSource(ctx, r.tcp, opts("go-source"))
		if err != nil {
			t.Fatal(err)
		}
		// Probe until `y3 observe` is subscribed (its first line), then send the readings.
		probes := 0
	probe:
		for {
			if _, err := src.SendMarshal(readings, NoiseData{Noise: -1}); err != nil {
				t.Fatal(err)
			}
			probes++
			select {
			case l := <-lines:
				if l.Value == nil || *l.Value != -1 {
					t.Fatalf("%#v", l)
				}
				break probe
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
				t.Fatalf("y3 observe never printed: %s", stderr.String())
			}
		}
		const n = 500
		s := sensor(7)
		var want []float32
		for i := range n {
			v := s.read()
			if _, err := src.SendMarshal(readings, NoiseData{Noise: v, Time: int64(i), From: "go"}); err != nil {
				t.Fatal(err)
			}
			want = append(want, v)
		}
		if err := src.Close(); err != nil {
			t.Fatal(err)
		}
		var got []float32
		for l := range lines {
			if l.Value != nil && *l.Value == -1 {
				continue // a probe
			}
			if l.Value == nil || l.Tag != readings || l.Hops != 0 {
				t.Fatalf("%#v", l)
			}
			got = append(got, *l.Value)
		}
		if err := observe.Wait(); err != nil {
			t.Fatalf("y3 observe: %v %s", err, stderr.String())
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("y3 observe printed %d of %d readings, or not in order", len(got), n)
		}
		t.Logf("y3 observe read %d Go readings (after %d probes)", len(got), probes)
	})

	t.Run("y3 send to go function and sink", func(t *testing.T) {
		fnCtx, stopFn := context.WithCancel(ctx)
		defer stopFn()
		fnDone := make(chan error, 1)
		go func() {
			fnDone <- client.RunStreamFunction(fnCtx, r.tcp, opts("go-function"), []uint32{readings}, noiseAlert(t))
		}()
		probeID := waitSubscribed(t, ctx, r.tcp)
		sink, err := client.ConnectSink(ctx, r.tcp, opts("go-sink"), []uint32{alerts})
		if err != nil {
			t.Fatal(err)
		}
		defer sink.Close()
		const n = 400
		s := sensor(11)
		var input strings.Builder
		var loud []float32
		for i := range n {
			v := s.read()
			fmt.Fprintf(&input, `{"tag":16,"node":[{"tag":17,"float32":%v},{"tag":18,"int64":%d}]}`+"\n", v, i)
			if v > threshold {
				loud = append(loud, v)
			}
		}
		send := exec.CommandContext(ctx, bin, "send", "--addr", r.tcp, "--token", token, "--tag", "0x10")
		send.Stdin = strings.NewReader(input.String())
		if out, err := send.CombinedOutput(); err != nil {
			t.Fatalf("y3 send: %v\n%s", err, out)
		}
		var got []client.Data
		for len(got) < len(loud) {
			d, err := sink.Recv(ctx)
			if err != nil {
				t.Fatalf("%d of %d alerts: %v", len(got), len(loud), err)
			}
			if d.Metadata[client.MetaSourceID] != probeID {
				got = append(got, d)
			}
		}
		for i, d := range got {
			p, ok, err := y3.Get(d.Payload, alerts, 0x21)
			if err != nil || !ok {
				t.Fatal(err)
			}
			if v, _ := p.Float32(); v != loud[i] || d.Hops != 1 {
				t.Fatalf("alert %d: %v hops %d, want %v", i, v, d.Hops, loud[i])
			}
		}
		qctx, qcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer qcancel()
		if d, err := sink.Recv(qctx); err == nil && d.Metadata[client.MetaSourceID] != probeID {
			t.Fatalf("an extra alert: %#v", d)
		}
		stopFn()
		if err := <-fnDone; err != nil {
			t.Fatal(err)
		}
		t.Logf("%d Rust readings through the Go function: %d alerts", n, len(got))
	})
}

// waitSubscribed waits until the noise-alert function observing 0x10 is subscribed: a
// probe source sends a loud reading until its alert reaches a probe sink. It returns the
// probe source's id (the yomo-source-id of its frames and of the alerts they cause).
func waitSubscribed(t *testing.T, ctx context.Context, addr string) string {
	t.Helper()
	probe, err := client.ConnectSink(ctx, addr, opts("probe-sink"), []uint32{alerts})
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	src, err := client.ConnectSource(ctx, addr, opts("probe-source"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for {
		if _, err := src.SendMarshal(readings, NoiseData{Noise: 99}); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		d, err := probe.Recv(rctx)
		cancel()
		if err == nil && d.Metadata[client.MetaSourceID] == src.ID() {
			return src.ID()
		}
		if ctx.Err() != nil {
			t.Fatal("the function never subscribed")
		}
	}
}

// selfSignedPEM is a certificate the router does not have.
func selfSignedPEM(t *testing.T) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "localhost"},
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
