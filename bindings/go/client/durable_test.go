package client_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/y3-dev/y3/bindings/go/client"
)

// The durable source test runs real `y3 serve` processes federated through a real
// nats-server with JetStream: $NATS_SERVER_BIN (scripts/test.sh installs it), else
// target/tools/bin/nats-server at the repository root, else nats-server on the PATH;
// without one it fails (a missing tool never turns into a green run).

func findNATS(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("NATS_SERVER_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("NATS_SERVER_BIN=%s: %v", p, err)
		}
		return p
	}
	if root, ok := repoRoot(); ok {
		p := filepath.Join(root, "target", "tools", "bin", "nats-server")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p
	}
	t.Fatal("nats-server not found: set NATS_SERVER_BIN or run scripts/test.sh, which installs it")
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startNATS starts a single nats-server with JetStream on loopback; its client URL. It is
// killed when the test ends.
func startNATS(t *testing.T) string {
	t.Helper()
	bin := findNATS(t)
	port := freePort(t)
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitFor(t, "nats-server", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return "nats://" + addr
}

// metric is a metric's value summed over its labels (0 when absent).
func (r *router) metric(name string) float64 {
	resp, err := http.Get(r.scrape)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest == "" || rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// A DurableSource keeps what the router has not stored: its router SIGKILLed mid-stream
// and restarted on the same port, it writes the rest again, and a sink on another router
// of the federation (a durable tag, through JetStream) gets every frame exactly once.
func TestDurableSourceRouterKilledMidStream(t *testing.T) {
	findRouter(t)
	natsURL := startNATS(t)
	const tag = 0x70
	federation := func(name string) string {
		return fmt.Sprintf("[federation]\nurls = [%q]\nname = %q\ndurable_tags = [%d]\n"+
			"[federation.stream]\nreplicas = 1\nack_wait_ms = 1000\n", natsURL, name, tag)
	}
	aOpts := routerOpts{token: token, tcp: fmt.Sprintf("127.0.0.1:%d", freePort(t)), config: federation("a")}
	a := startRouter(t, aOpts)
	c := startRouter(t, routerOpts{token: token, config: federation("c"), metrics: true})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sink, err := client.ConnectSink(ctx, c.tcp, opts("durable-sink"), []uint32{tag})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	waitFor(t, "the durable consumer on C", func() bool {
		return c.metric("y3_router_federation_subscriptions") >= 1
	})

	const n = 5000
	got := receiveNumbers(ctx, t, sink, tag, n)

	o := opts("durable-source")
	o.Backoff = client.Backoff{Initial: 50 * time.Millisecond, Max: 300 * time.Millisecond, Attempts: 60}
	src, err := client.ConnectDurableSource(ctx, a.tcp, o)
	if err != nil {
		t.Fatal(err)
	}
	sent := make(chan error, 1)
	go func() {
		for i := range n {
			// Half with the source's own metadata, half as given.
			var err error
			if i%2 == 0 {
				_, err = src.SendContext(ctx, tag, []byte(strconv.Itoa(i)))
			} else {
				md := map[string]string{client.MetaSourceID: src.ID(), client.MetaTID: fmt.Sprintf("g-%d", i)}
				err = src.SendData(ctx, client.Data{Tag: tag, Metadata: md, Payload: []byte(strconv.Itoa(i))})
			}
			if err != nil {
				sent <- err
				return
			}
			if i%100 == 99 {
				time.Sleep(5 * time.Millisecond)
			}
		}
		wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
		defer wcancel()
		sent <- src.WaitStored(wctx)
	}()

	// SIGKILL: whatever A had read and not stored is lost there; the source still holds it.
	time.Sleep(150 * time.Millisecond)
	killAndRestart(t, a, aOpts, "A", sent, 200*time.Millisecond)
	if err := <-sent; err != nil {
		t.Fatalf("sending: %v (unacked %d)", err, src.Unacked())
	}
	if err := src.Close(ctx); err != nil {
		t.Fatal(err)
	}

	seen := receiveUntilQuiet(got, n, 5*time.Second)
	missing, twice := tally(seen, n)
	t.Logf("router killed: the source wrote %d frames again; the sink got %d distinct, %d missing, %d twice",
		src.Resent(), len(seen), len(missing), len(twice))
	if len(missing) > 0 || len(twice) > 0 {
		t.Fatalf("missing %v, twice %v", head(missing), head(twice))
	}
}

func head(s []int) []int { return s[:min(len(s), 10)] }

// receiveNumbers reads sink until it ends, each payload (a decimal number, under tag) onto
// the channel returned, which holds 2n; the channel is closed when the sink ends.
func receiveNumbers(ctx context.Context, t *testing.T, sink *client.Sink, tag uint32, n int) <-chan int {
	got := make(chan int, n*2)
	go func() {
		defer close(got)
		for {
			d, err := sink.Recv(ctx)
			if err != nil {
				return
			}
			i, err := strconv.Atoi(string(d.Payload))
			if err != nil || d.Tag != tag {
				t.Errorf("tag %#x payload %q", d.Tag, d.Payload)
			}
			got <- i
		}
	}()
	return got
}

// killAndRestart SIGKILLs router r (named name) while its sender, which reports on sent
// when done, is still at work, and restarts it with o (the same port) after pause.
func killAndRestart(t *testing.T, r *router, o routerOpts, name string, sent <-chan error, pause time.Duration) *router {
	t.Helper()
	select {
	case err := <-sent:
		t.Fatalf("the source had finished before %s was killed: %v", name, err)
	default:
	}
	_ = r.cmd.Process.Kill()
	if err := r.wait(5 * time.Second); err == nil {
		t.Fatalf("%s exited cleanly after SIGKILL", name)
	}
	time.Sleep(pause)
	return startRouter(t, o)
}

// receiveUntilQuiet counts how often each number arrives on got until n distinct ones did
// or none came for idle (or got closed), then what is already late (a second copy).
func receiveUntilQuiet(got <-chan int, n int, idle time.Duration) map[int]int {
	seen := make(map[int]int)
	quiet := time.NewTimer(idle)
	defer quiet.Stop()
receive:
	for len(seen) < n {
		select {
		case i, ok := <-got:
			if !ok {
				break receive
			}
			seen[i]++
			quiet.Reset(idle)
		case <-quiet.C:
			break receive
		}
	}
	time.Sleep(300 * time.Millisecond)
	for len(got) > 0 {
		seen[<-got]++
	}
	return seen
}

// tally is the numbers below n that seen lacks and those it has more than once.
func tally(seen map[int]int, n int) (missing, twice []int) {
	for i := range n {
		switch seen[i] {
		case 0:
			missing = append(missing, i)
		case 1:
		default:
			twice = append(twice, i)
		}
	}
	return missing, twice
}
