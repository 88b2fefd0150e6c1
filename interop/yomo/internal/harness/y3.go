package harness

import (
	"net"
	"os"
	"strings"
	"sync"
	"testing"
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

// y3ReadyPrefix starts the line `y3 serve` prints once it listens:
// `y3 router listening: tcp 127.0.0.1:PORT quic 127.0.0.1:PORT metrics off`.
const y3ReadyPrefix = "y3 router listening:"

// y3Router is `$Y3_BIN serve` as a subprocess.
type y3Router struct {
	t    testing.TB
	bin  string
	opts Options

	mu   sync.Mutex
	addr string
	proc *Process // nil while stopped
}

func startY3(t testing.TB, opts Options, addr string) *y3Router {
	t.Helper()
	bin := Y3Bin(t)
	if len(opts.Mesh) > 0 {
		// y3 reads its mesh from the [mesh] table of its TOML config; this harness does
		// not write one yet.
		t.Skip("a y3 router with mesh peers is not supported by this harness yet")
	}
	r := &y3Router{t: t, bin: bin, opts: opts}
	if addr == "" {
		addr = FreeUDPAddr(t)
	}
	r.start(addr)
	return r
}

func (r *y3Router) start(quicAddr string) {
	r.t.Helper()
	args := []string{"serve", "--tcp", "127.0.0.1:0", "--quic", quicAddr, "--metrics", ""}
	if r.opts.Token != "" {
		args = append(args, "--token", r.opts.Token)
	}
	var env []string
	if os.Getenv("RUST_LOG") == "" {
		env = append(env, "RUST_LOG=warn")
	}
	p := StartProcess(r.t, nil, env, r.bin, args...)
	line, err := p.WaitLine(y3ReadyPrefix, ReadyTimeout)
	if err != nil {
		p.Stop()
		r.t.Fatalf("%s serve: %v\nstderr:\n%s", r.bin, err, p.Stderr())
	}
	go p.drain()
	addr := quicAddrOf(line)
	if addr == "" || addr == "off" {
		p.Stop()
		r.t.Fatalf("no quic address in %q", line)
	}
	r.mu.Lock()
	r.proc, r.addr = p, addr
	r.mu.Unlock()
}

// quicAddrOf reads the address after "quic" in the ready line.
func quicAddrOf(line string) string {
	fields := strings.Fields(strings.TrimPrefix(line, y3ReadyPrefix))
	for i := 0; i+1 < len(fields); i++ {
		if fields[i] == "quic" {
			return fields[i+1]
		}
	}
	return ""
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
