package harness

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/y3-dev/y3/bindings/go/client/servetest"
)

// Y3BinEnv names the environment variable holding the path of the y3 binary.
const Y3BinEnv = "Y3_BIN"

// Y3Bin is $Y3_BIN, or skips the test when it is unset.
func Y3Bin(t testing.TB) string {
	t.Helper()
	bin := os.Getenv(Y3BinEnv)
	if bin == "" {
		t.Skipf("%s is not set: to test y3 too, build it (cargo build -p y3-cli) and set %s to the binary's absolute path", Y3BinEnv, Y3BinEnv)
	}
	return bin
}

// StartY3 starts `$Y3_BIN serve ARGS` the one way every Go test does (servetest): in dir,
// its private directory (ready file; dev certificate and state as its XDG_RUNTIME_DIR and
// XDG_STATE_HOME; a test's t.TempDir(), or one kept across restarts), with env after that,
// RUST_LOG=warn unless set, and waits ReadyTimeout for its ready file. Its stdout is
// drained. A router that exits first or writes no ready file fails the test.
func StartY3(t testing.TB, dir string, env []string, args ...string) (*Process, *servetest.Ready) {
	t.Helper()
	bin := Y3Bin(t)
	d := servetest.Dir(dir)
	env = append(d.Env(), env...)
	if os.Getenv("RUST_LOG") == "" {
		env = append(env, "RUST_LOG=warn")
	}
	p := StartProcess(t, nil, env, bin, append(args, d.Args()...)...)
	go p.drain()
	ready, err := d.Wait(p.cmd.Process.Pid, ReadyTimeout, p.exited)
	if err != nil {
		p.Stop()
		t.Fatalf("%s %s: %v (exit: %v)\nstderr:\n%s", bin, strings.Join(args, " "), err, p.err, p.Stderr())
	}
	return p, ready
}

// y3Router is `$Y3_BIN serve` as a subprocess.
type y3Router struct {
	t      testing.TB
	opts   Options
	config string // the TOML config file with the [mesh] section; "" without a mesh
	state  string // the directory of every start (servetest): the QUIC reset secret survives restarts

	mu      sync.Mutex
	addr    string
	metrics string   // http://ADDR/metrics
	proc    *Process // nil while stopped
}

func startY3(t testing.TB, opts Options, addr string) *y3Router {
	t.Helper()
	Y3Bin(t) // skips the test without it, before anything is made
	r := &y3Router{t: t, opts: opts, state: t.TempDir()}
	if len(opts.Mesh) > 0 || len(opts.Filters) > 0 || opts.Config != "" {
		r.config = writeY3Config(t, opts)
	}
	if addr == "" {
		addr = FreeUDPAddr(t)
	}
	r.start(addr)
	return r
}

// y3MeshName is the [mesh] name of a y3 router whose [Options.Name] is empty.
const y3MeshName = "y3-router"

// y3Config is the TOML config of a y3 router with a mesh or filters: its name, every
// downstream zipper dialed over QUIC as a YoMo UpstreamZipper (0x5E) client, and the
// filters attached to functions. Everything else comes from the command line.
func y3Config(opts Options) string {
	name := opts.Name
	if name == "" {
		name = y3MeshName
	}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "[mesh]\nname = %s\n", tomlString(name))
	for _, p := range opts.Mesh {
		fmt.Fprintf(&cfg, "\n[[mesh.downstream]]\nname = %s\naddr = %s\ncredential = %s\ntransport = \"quic\"\n",
			tomlString(p.Name), tomlString(p.Addr), tomlString(p.Credential))
	}
	for _, f := range opts.Filters {
		fmt.Fprintf(&cfg, "\n[[filters.attach]]\nfunction = %s\ntag = %d\nfilter = %s\n",
			tomlString(f.Function), f.Tag, tomlString(f.Text))
	}
	if opts.Config != "" {
		fmt.Fprintf(&cfg, "\n%s\n", opts.Config)
	}
	return cfg.String()
}

// writeY3Config writes [y3Config] to a file in the test's temporary directory.
func writeY3Config(t testing.TB, opts Options) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "y3-router.toml")
	if err := os.WriteFile(file, []byte(y3Config(opts)), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// tomlString quotes s as a TOML basic string. For text without control characters the
// escapes of strconv.QuoteToASCII (\", \\, \uXXXX, \UXXXXXXXX) are TOML's too.
func tomlString(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		panic(fmt.Sprintf("harness: %q has control characters; not written as a TOML string", s))
	}
	return strconv.QuoteToASCII(s)
}

func (r *y3Router) start(quicAddr string) {
	r.t.Helper()
	args := []string{"serve", "--tcp", "127.0.0.1:0", "--quic", quicAddr, "--metrics", "127.0.0.1:0"}
	if r.config != "" {
		args = append(args, "--config", r.config)
	}
	if r.opts.Token != "" {
		args = append(args, "--token", r.opts.Token)
	}
	if r.opts.TCPTLS {
		args = append(args, "--tcp-tls")
	}
	p, ready := StartY3(r.t, r.state, []string{"STATE_DIRECTORY="}, args...)
	addr, metrics := ready.Listener("quic"), ready.Listener("metrics")
	if addr == "" || metrics == "" {
		p.Stop()
		r.t.Fatalf("no quic or metrics address in %+v", ready)
	}
	r.mu.Lock()
	r.proc, r.addr, r.metrics = p, addr, "http://"+metrics+"/metrics"
	r.mu.Unlock()
}

// y3AcceptedMetric is the counter of connections y3 accepted, one series per transport.
const y3AcceptedMetric = "y3_router_accepted_connections_total"

// AcceptedConnections sums y3's accepted-connections counter over its transports, read
// from its Prometheus endpoint. A restart resets it.
func (r *y3Router) AcceptedConnections() (int, error) {
	return r.Metric(y3AcceptedMetric)
}

// Metric sums the series of the Prometheus metric name (e.g.
// `y3_router_rejected_total{reason="unauthorized"}` for one series, or a bare name for all)
// read from y3's metrics endpoint. A restart resets it.
func (r *y3Router) Metric(name string) (int, error) {
	r.mu.Lock()
	url := r.metrics
	r.mu.Unlock()
	if url == "" {
		return 0, fmt.Errorf("y3 serve is not running")
	}
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return sumCounter(string(body), name)
}

// sumCounter adds the values of every series of the counter name in Prometheus text.
func sumCounter(text, name string) (int, error) {
	total := 0
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(fields) == 0 {
			return 0, fmt.Errorf("no value in %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("%q: %w", line, err)
		}
		total += int(v)
	}
	return total, nil
}

func (r *y3Router) Kind() Kind { return Y3 }

func (r *y3Router) Addr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addr
}

// Stop sends SIGTERM: y3 drains and closes every connection with a code that makes YoMo
// clients reconnect (not 0x13).
func (r *y3Router) Stop() {
	r.mu.Lock()
	p := r.proc
	r.proc = nil
	r.mu.Unlock()
	if p == nil {
		return
	}
	if err := p.Stop(); err != nil {
		r.t.Errorf("y3 serve did not stop cleanly: %v\nstderr:\n%s", err, p.Stderr())
	}
}

func (r *y3Router) Restart() {
	r.t.Helper()
	addr := r.Addr()
	r.Stop()
	r.start(addr)
}

// FreeUDPAddr returns 127.0.0.1:PORT with a UDP port that was free a moment ago.
func FreeUDPAddr(t testing.TB) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().String()
}

var _ ConnCounter = (*y3Router)(nil)
