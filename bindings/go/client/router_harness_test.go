package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	y3 "github.com/y3-dev/y3/bindings/go"
	"github.com/y3-dev/y3/bindings/go/client"
	"github.com/y3-dev/y3/bindings/go/client/servetest"
)

// The integration tests run the real router, `y3 serve` from crates/y3-cli. The binary is
// $Y3_BIN (the test command sets it: scripts/test.sh builds the router once), else
// debug/y3 under $CARGO_TARGET_DIR or the repository's target/, built with
// `cargo build -p y3-cli` when it is missing. A binary that cannot be found or built fails
// the test (t.Fatal): a green run never hides a router that was not there. So does a binary
// that answers a handshake with y3's frames from before spec/frames.md took YoMo's protocol
// (a stale build, or a handshake regression). Only `go test -short` skips them, by request.

var routerBin struct {
	once sync.Once
	path string
	err  string // why there is no router binary, if there is none

	probed sync.Once
	stale  string // why the binary speaks the old protocol, if it does
}

// repoRoot walks up from the working directory to the directory holding crates/y3-cli.
func repoRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "crates", "y3-cli", "Cargo.toml")); err == nil {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

func findRouter(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test with the router binary: skipped in -short mode")
	}
	routerBin.once.Do(func() {
		if p := os.Getenv("Y3_BIN"); p != "" {
			if _, err := os.Stat(p); err != nil {
				routerBin.err = fmt.Sprintf("Y3_BIN=%s: %v", p, err)
				return
			}
			routerBin.path = p
			return
		}
		root, ok := repoRoot()
		if !ok {
			routerBin.err = "router binary not found: set Y3_BIN to a `y3` binary (crates/y3-cli)"
			return
		}
		targetDir := filepath.Join(root, "target")
		if d := os.Getenv("CARGO_TARGET_DIR"); d != "" {
			targetDir = d
			if !filepath.IsAbs(d) {
				targetDir = filepath.Join(root, d)
			}
		}
		candidate := filepath.Join(targetDir, "debug", "y3")
		if _, err := os.Stat(candidate); err == nil {
			routerBin.path = candidate
			return
		}
		cargo, err := exec.LookPath("cargo")
		if err != nil {
			routerBin.err = "router binary not found: set Y3_BIN, or build it with `cargo build -p y3-cli` (no cargo on the PATH)"
			return
		}
		// A generous budget, but within `go test -timeout` (leaving a minute for the tests).
		budget := 20 * time.Minute
		if deadline, ok := t.Deadline(); ok {
			budget = min(budget, time.Until(deadline)-time.Minute)
		}
		if budget < 30*time.Second {
			routerBin.err = "router binary not found and no time left to build it: run `cargo build -p y3-cli` or set Y3_BIN"
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		defer cancel()
		t.Logf("building the router: cargo build -p y3-cli (at most %v)", budget.Round(time.Second))
		cmd := exec.CommandContext(ctx, cargo, "build", "-p", "y3-cli")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			routerBin.err = fmt.Sprintf("`cargo build -p y3-cli` failed: %v\n%s", err, tail(string(out), 2000))
			return
		}
		if _, err := os.Stat(candidate); err != nil {
			routerBin.err = "`cargo build -p y3-cli` did not produce " + candidate
			return
		}
		routerBin.path = candidate
	})
	if routerBin.err != "" {
		t.Fatal(routerBin.err)
	}
	return routerBin.path
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// syncBuffer collects a process's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type routerOpts struct {
	token   string
	tls     bool   // TLS on the TCP listener
	tcp     string // listen address (default 127.0.0.1:0)
	config  string // more of the router's TOML configuration
	metrics bool   // serve the metrics endpoint (router.metrics)
}

// router is a running `y3 serve`.
type router struct {
	t      *testing.T
	cmd    *exec.Cmd
	tcp    string
	quic   string
	scrape string // the metrics URL, with routerOpts.metrics
	cert   string // the generated dev certificate (PEM)
	stdout *syncBuffer
	stderr *syncBuffer
	exited chan struct{}
	err    error // the exit status, once exited is closed
}

// startRouter starts `y3 serve` on loopback with free ports, a short drain, and a dev
// certificate in a temporary directory, and reads its addresses from its ready file
// (servetest); it is stopped (and killed if need be) when the
// test ends.
func startRouter(t *testing.T, o routerOpts) *router {
	t.Helper()
	bin := findRouter(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "router.toml")
	toml := "[shutdown]\ndrain_timeout_ms = 1500\nquiet_ms = 50\n" + o.config
	if err := os.WriteFile(config, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	if o.tcp == "" {
		o.tcp = "127.0.0.1:0"
	}
	r := &router{t: t, cert: filepath.Join(dir, "cert.pem"), stdout: &syncBuffer{}, stderr: &syncBuffer{},
		exited: make(chan struct{})}
	metrics := ""
	if o.metrics {
		metrics = "127.0.0.1:0"
	}
	args := []string{"serve", "--config", config, "--tcp", o.tcp, "--quic", "127.0.0.1:0", "--metrics", metrics,
		"--dev-cert-out", r.cert}
	if o.token != "" {
		args = append(args, "--token", o.token)
	}
	if o.tls {
		args = append(args, "--tcp-tls")
	}
	serveDir := servetest.Dir(dir)
	args = append(args, serveDir.Args()...)
	r.cmd = exec.Command(bin, args...)
	r.cmd.Env = append(append(os.Environ(), serveDir.Env()...), "RUST_LOG=info")
	r.cmd.Stderr = r.stderr
	r.cmd.Stdout = r.stdout
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r.err = r.cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		r.terminate()
		select {
		case <-r.exited:
		case <-time.After(5 * time.Second):
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
		if t.Failed() {
			t.Logf("router stdout:\n%s\nrouter stderr:\n%s", r.stdout, tail(r.stderr.String(), 6000))
		}
	})
	ready, err := serveDir.Wait(r.cmd.Process.Pid, 15*time.Second, r.exited)
	if errors.Is(err, servetest.ErrExited) {
		<-r.exited
		t.Fatalf("router exited: %v\n%s", r.err, r.stderr)
	} else if err != nil {
		t.Fatalf("router did not start: %v\n%s", err, r.stderr)
	}
	r.tcp, r.quic = ready.Listener("tcp"), ready.Listener("quic")
	if m := ready.Listener("metrics"); m != "" {
		r.scrape = "http://" + m + "/metrics"
	}
	routerBin.probed.Do(func() { routerBin.stale = probeProtocol(r.tcp, o) })
	if routerBin.stale != "" {
		t.Fatalf("%s: %s; rebuild it (cargo build -p y3-cli) or set Y3_BIN", bin, routerBin.stale)
	}
	return r
}

// probeProtocol sends a handshake of spec/frames.md and reads the answer's first two bytes:
// an ack is a9 00, and a refusal a rejected or goaway frame of the new types. y3's old
// router answers with its accepted frame (a9 and a length) or its goaway type (b0). It
// returns why the router is stale, or "".
func probeProtocol(addr string, o routerOpts) string {
	d := client.TCPDialer{}
	if o.tls {
		d.TLS = client.InsecureTLSConfig()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := d.DialStream(ctx, addr)
	if err != nil {
		return "" // let the test say what is wrong
	}
	defer s.Close()
	hello, _ := client.EncodeFrame(client.Handshake{Name: "probe", ID: client.NewID() + "-0",
		ClientType: client.ClientSource, AuthName: "token", AuthPayload: o.token, Version: client.Version,
		ExtensionLevel: client.ExtensionLevel}, 0)
	_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := s.Write(hello); err != nil {
		return ""
	}
	var head [2]byte
	if _, err := io.ReadFull(s, head[:]); err != nil {
		return ""
	}
	switch {
	case head == [2]byte{0xa9, 0x00}, head[0] == 0xb9, head[0] == 0xae, head[0] == 0xbe:
		return ""
	case head[0] == 0xa9, head[0] == 0xb0:
		return fmt.Sprintf("the router answers a handshake with % x: y3's old frame protocol", head)
	}
	return ""
}

// terminate asks the router to drain and stop (SIGTERM, as Ctrl-C). `y3 serve` installs
// its SIGTERM handler before it writes its ready file, so a signal sent once the file is
// there drains it.
func (r *router) terminate() {
	select {
	case <-r.exited:
	default:
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
	}
}

// wait waits for the router to exit.
func (r *router) wait(d time.Duration) error {
	select {
	case <-r.exited:
		return r.err
	case <-time.After(d):
		return errors.New("router still running")
	}
}

func (r *router) certPEM() []byte {
	b, err := os.ReadFile(r.cert)
	if err != nil {
		r.t.Fatal(err)
	}
	return b
}

// The noise pipeline, as `y3 demo` runs it in Rust.

type NoiseData struct {
	Noise float32 `y3:"0x11"`
	Time  int64   `y3:"0x12"`
	From  string  `y3:"0x13"`
}

const (
	readings  = 0x10
	alerts    = 0x20
	threshold = 60
)

// sensor is a deterministic noise sensor: a quiet room with occasional loud moments.
type sensor uint64

func (s *sensor) unit() float32 {
	*s = *s*6364136223846793005 + 1442695040888963407
	return float32(uint64(*s)>>40) / float32(1<<24)
}

func (s *sensor) read() float32 {
	base := 42 + 10*s.unit()
	spike := float32(0)
	if s.unit() < 0.3 {
		spike = 30 * s.unit()
	}
	return float32(int((base+spike)*10+0.5)) / 10
}

// noiseAlert is the stream function's handler: it pulls NoiseData.Noise (0x10/0x11) out of
// the payload with the streaming observer, and emits Alert{0x21 noise, 0x22 threshold}
// under 0x20 above the threshold.
func noiseAlert(t *testing.T) client.Handler {
	obs, err := y3.NewObserver(y3.DefaultConfig, y3.Path{0x10, 0x11})
	if err != nil {
		t.Fatal(err)
	}
	return func(_ context.Context, in client.Data) (uint32, []byte, bool, error) {
		obs.Reset()
		var noise float32
		found := false
		err := obs.FeedAll(in.Payload, func(v *y3.Observed) error {
			var err error
			noise, err = v.Float32()
			found = true
			return err
		})
		if err != nil || !found {
			return 0, nil, false, nil // not a reading: no output
		}
		if noise <= threshold {
			return 0, nil, false, nil
		}
		alert, err := y3.NewNode(alerts,
			y3.Item{ID: 0x21, Value: y3.Float32(noise)},
			y3.Item{ID: 0x22, Value: y3.Float32(threshold)},
		).Encode(y3.Golang)
		return alerts, alert, err == nil, err
	}
}

// recvN receives exactly n frames from sink (failing at the deadline), then makes sure no
// extra frame follows within quiet.
func recvN(t *testing.T, ctx context.Context, sink *client.Sink, n int, quiet time.Duration) []client.Data {
	t.Helper()
	var got []client.Data
	for len(got) < n {
		d, err := sink.Recv(ctx)
		if err != nil {
			t.Fatalf("received %d of %d frames: %v", len(got), n, err)
		}
		got = append(got, d)
	}
	qctx, cancel := context.WithTimeout(ctx, quiet)
	defer cancel()
	if d, err := sink.Recv(qctx); err == nil {
		t.Fatalf("an extra frame after %d: %#v", n, d)
	}
	return got
}
