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
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	y3 "github.com/y3-dev/y3/bindings/go"
	"github.com/y3-dev/y3/bindings/go/client"
	"github.com/y3-dev/y3/bindings/go/client/quicdial"
)

const token = "secret"

func opts(name string) client.Options {
	return client.Options{Name: name, Token: token, HandshakeTimeout: 3 * time.Second}
}

// runPipeline runs Go source → Go stream function → Go sink through the router at the
// given addresses and checks that every frame arrives exactly once: n readings on 0x10
// (seen by a second sink too), one alert on 0x20 per loud reading.
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
	loud := map[uint64]float32{}
	sent := map[uint64]NoiseData{}
	for i := range n {
		reading := NoiseData{Noise: s.read(), Time: 1600000000000 + int64(i), From: "go-sensor"}
		id, err := src.SendMarshal(readings, reading)
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if id != uint64(i+1) {
			t.Fatalf("id %d for frame %d", id, i)
		}
		sent[id] = reading
		if reading.Noise > threshold {
			loud[id] = reading.Noise
		}
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}

	got := recvN(t, ctx, readingSink, n, 200*time.Millisecond)
	for i, d := range got {
		var back NoiseData
		if err := y3.Unmarshal(d.Payload, readings, &back); err != nil {
			t.Fatal(err)
		}
		if d.ID != uint64(i+1) || d.Tag != readings || d.Hops != 0 || back != sent[d.ID] {
			t.Fatalf("reading %d: %#v %#v", i, d, back)
		}
	}
	got = recvN(t, ctx, alertSink, len(loud), 300*time.Millisecond)
	for _, d := range got {
		noise, ok := loud[d.ID]
		if !ok || d.Tag != alerts || d.Hops != 1 {
			t.Fatalf("alert %#v for a quiet reading", d)
		}
		delete(loud, d.ID)
		p, ok, err := y3.Get(d.Payload, alerts, 0x21)
		if err != nil || !ok {
			t.Fatal(err)
		}
		if v, _ := p.Float32(); v != noise {
			t.Fatalf("alert %d: %v, want %v", d.ID, v, noise)
		}
	}
	if len(loud) != 0 {
		t.Fatalf("%d alerts missing", len(loud))
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

// The same over TLS 1.3 on the TCP listener, trusting the router's dev certificate three
// ways (CA pool, pinned, insecure); an untrusted certificate is a tls error, not retried.
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

// A wrong token is refused with the typed unauthorized error, at once (not retried), for
// every role; a sink observing nothing is a bad_handshake.
func TestRouterWrongToken(t *testing.T) {
	r := startRouter(t, routerOpts{token: token})
	ctx := context.Background()
	bad := opts("guesser")
	bad.Token = "guess"
	start := time.Now()
	_, err := client.ConnectSource(ctx, r.tcp, bad)
	var e *client.Error
	if !errors.As(err, &e) || e.Kind != client.KindUnauthorized || e.Code != client.CodeUnauthorized ||
		e.Reason != "wrong token" || !errors.Is(err, client.ErrUnauthorized) || e.Retryable() {
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
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Fatalf("refusals took %v: retried?", elapsed)
	}
	_, err = client.ConnectSink(ctx, r.tcp, opts("blind"), nil)
	if !errors.As(err, &e) || e.Kind != client.KindBadHandshake || !strings.Contains(e.Reason, "at least one tag") {
		t.Fatalf("%v", err)
	}
	// The right token still works.
	src, err := client.ConnectSource(ctx, r.tcp, opts("ok"))
	if err != nil {
		t.Fatal(err)
	}
	if src.Session() == 0 {
		t.Fatal("no session id")
	}
	_ = src.Close()
}

// Router shutdown: the source gets shutting_down from Send, the sink and the function see
// the goaway and, the router being gone, give up reconnecting (gave_up).
func TestRouterShutdown(t *testing.T) {
	r := startRouter(t, routerOpts{token: token})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var mu sync.Mutex
	goaways := map[string]client.GoawayCode{}
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
	// The source is told first; it keeps sending until Send reports the goaway.
	var sendErr error
	for sendErr == nil && ctx.Err() == nil {
		_, sendErr = src.Send(readings, []byte("during"))
		time.Sleep(5 * time.Millisecond)
	}
	var e *client.Error
	if !errors.As(sendErr, &e) || e.Kind != client.KindShuttingDown || e.Code != client.CodeShuttingDown || !e.Retryable() {
		t.Fatalf("source: %#v", sendErr)
	}
	if err := r.wait(10 * time.Second); err != nil {
		t.Fatalf("router exit: %v", err)
	}
	if !strings.Contains(r.stdout.String(), "stopped:") {
		t.Fatalf("router output: %s", r.stdout)
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

// A router restart: the sink and the function reconnect to the new router on the same
// port and the pipeline flows again; the source reports the goaway once, then reconnects.
func TestRouterRestartReconnect(t *testing.T) {
	first := startRouter(t, routerOpts{token: token})
	ctx, cancel := context.WithTimeout(context.Background(), 18*time.Second)
	defer cancel()
	o := opts("restart")
	o.Backoff = client.Backoff{Initial: 50 * time.Millisecond, Max: 300 * time.Millisecond, Attempts: 40}
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
			if _, err := src.Send(readings, []byte(payload)); err != nil && !errors.Is(err, client.ErrShuttingDown) {
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

func (rc *rawConn) send(f client.Frame) {
	b, err := client.EncodeFrame(f, 0)
	if err != nil {
		rc.t.Fatal(err)
	}
	rc.write(b)
}

// next reads one frame's exact bytes off the wire (header, then body), decodes them, and
// checks that the Go encoder writes the very same bytes for the decoded frame.
func (rc *rawConn) next() ([]byte, client.Frame) {
	rc.t.Helper()
	head := []byte{}
	b, err := rc.r.ReadByte()
	if err != nil {
		rc.t.Fatalf("read: %v", err)
	}
	head = append(head, b)
	var n int
	for i := 0; ; i++ {
		c, err := rc.r.ReadByte()
		if err != nil {
			rc.t.Fatal(err)
		}
		head = append(head, c)
		n = n<<7 | int(c&0x7f)
		if c&0x80 == 0 {
			break
		}
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(rc.r, body); err != nil {
		rc.t.Fatal(err)
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
	return raw, f
}

// Frames written by the real router decode in Go and re-encode to the same bytes; Go's
// frame errors carry the same kind and numbers as the Rust decoder's (the router puts its
// error's message in the goaway it answers a bad first frame with).
func TestRouterRawFrames(t *testing.T) {
	r := startRouter(t, routerOpts{token: token})
	bin := findRouter(t)

	// Handshake → accepted; ping → pong.
	rc := dialRaw(t, r.tcp)
	rc.send(client.Handshake{Version: client.Version, Role: client.RoleSink, Name: "raw", Token: token,
		Observed: []uint32{readings, 0x200}})
	_, f := rc.next()
	acc, ok := f.(client.Accepted)
	if !ok || acc.Version != 1 || acc.Session == 0 {
		t.Fatalf("%#v", f)
	}
	rc.send(client.Ping{Nonce: math.MaxUint64 - 1})
	if _, f := rc.next(); f != (client.Pong{Nonce: math.MaxUint64 - 1}) {
		t.Fatalf("%#v", f)
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
		if !ok || d.Tag != wantTags[i] || d.ID != uint64(i+1) || hex.EncodeToString(d.Payload) != wantPayloads[i] {
			t.Fatalf("frame %d: % x %#v", i, raw, f)
		}
	}

	// Bad first frames: the router's goaway reason is the Rust error's message; Go's
	// error for the same bytes gives the same message.
	bad := []string{
		"474554202f20485454502f312e310d0a", // GET / HTTP/1.1
		"1001",
		"a0ff",
		"bf7f",
		"bf87ffffff7f",
		"bf8fffffff7f",
		"bf03010110",
		"b106010101020109",
		"b103020101",
		"b106020101010102", // version 2
		"bf0301 0501",
		"bf08010110 020101 8500",
		"b106010101020102 ",
		"b107010101020102 0500",
		"b108010101020102 0500",
		"b108010101020102 4500",
		"b10e010101020102 c506 000110 000180",
		"b10c010101020102 030180 0401ff",
		"aa03010107",
	}
	for _, h := range bad {
		wire := unhex(t, h)
		rc := dialRaw(t, r.tcp)
		rc.write(wire)
		_, f := rc.next()
		g, ok := f.(client.Goaway)
		if !ok {
			t.Fatalf("%s: %#v", h, f)
		}
		_, goErr := client.NewFrameReader(bytes.NewReader(wire), 0).Next()
		switch {
		case goErr == nil || goErr == io.EOF:
			// A valid frame the router refuses for what it says.
			t.Logf("%s: router: %v %q", h, g.Code, g.Reason)
			if g.Code == client.CodeProtocolError && !strings.HasPrefix(g.Reason, "expected a handshake") {
				t.Errorf("%s: %q", h, g.Reason)
			}
		default:
			if g.Code != client.CodeProtocolError || g.Reason != rustReason(goErr) {
				t.Errorf("%s: router %v %q, Go %q (%v)", h, g.Code, g.Reason, rustReason(goErr), client.KindOf(goErr))
			}
		}
	}

	// A truncated frame at the end of the stream.
	rc = dialRaw(t, r.tcp)
	rc.write(unhex(t, "bf0b 010110"))
	_ = rc.c.(*net.TCPConn).CloseWrite()
	_, f = rc.next()
	_, goErr := client.NewFrameReader(bytes.NewReader(unhex(t, "bf0b 010110")), 0).Next()
	if g, ok := f.(client.Goaway); !ok || g.Reason != rustReason(goErr) {
		t.Fatalf("%#v vs %q", f, rustReason(goErr))
	}

	// The wrong token's goaway, byte for byte.
	rc = dialRaw(t, r.tcp)
	rc.send(client.Handshake{Version: 1, Role: client.RoleSource, Token: "guess"})
	raw, _ := rc.next()
	want, _ := client.EncodeFrame(client.Goaway{Code: client.CodeUnauthorized, Reason: "wrong token"}, 0)
	if !bytes.Equal(raw, want) {
		t.Fatalf("% x", raw)
	}
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
			ID    uint64   `json:"id"`
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
		want := map[uint64]float32{}
		for i := range n {
			v := s.read()
			id, err := src.SendMarshal(readings, NoiseData{Noise: v, Time: int64(i), From: "go"})
			if err != nil {
				t.Fatal(err)
			}
			want[id] = v
		}
		if err := src.Close(); err != nil {
			t.Fatal(err)
		}
		got := 0
		for l := range lines {
			if l.Value != nil && *l.Value == -1 {
				continue // a probe
			}
			v, ok := want[l.ID]
			if !ok || l.Value == nil || *l.Value != v || l.Tag != readings {
				t.Fatalf("%#v, want value %v", l, v)
			}
			delete(want, l.ID)
			got++
		}
		if err := observe.Wait(); err != nil {
			t.Fatalf("y3 observe: %v %s", err, stderr.String())
		}
		if got != n || len(want) != 0 {
			t.Fatalf("y3 observe printed %d of %d readings", got, n)
		}
		t.Logf("y3 observe read %d Go readings (after %d probes)", got, probes)
	})

	t.Run("y3 send to go function and sink", func(t *testing.T) {
		fnCtx, stopFn := context.WithCancel(ctx)
		defer stopFn()
		fnDone := make(chan error, 1)
		go func() {
			fnDone <- client.RunStreamFunction(fnCtx, r.tcp, opts("go-function"), []uint32{readings}, noiseAlert(t))
		}()
		waitSubscribed(t, ctx, r.tcp)
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
			if d.ID != probeID {
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
		if d, err := sink.Recv(qctx); err == nil && d.ID != probeID {
			t.Fatalf("an extra alert: %#v", d)
		}
		stopFn()
		if err := <-fnDone; err != nil {
			t.Fatal(err)
		}
		t.Logf("%d Rust readings through the Go function: %d alerts", n, len(got))
	})
}

const probeID = math.MaxUint64 - 1

// waitSubscribed waits until the noise-alert function observing 0x10 is subscribed: a
// probe source sends a loud reading with the id probeID until its alert reaches a probe
// sink.
func waitSubscribed(t *testing.T, ctx context.Context, addr string) {
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
		if err := src.SendData(ctx, client.Data{Tag: readings, ID: probeID, Payload: mustMarshal(t, NoiseData{Noise: 99})}); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		d, err := probe.Recv(rctx)
		cancel()
		if err == nil && d.ID == probeID {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("the function never subscribed")
		}
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	b, err := client.MarshalPayload(readings, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
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
