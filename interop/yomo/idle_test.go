package interop_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/y3-dev/y3/interop/yomo/internal/harness"
	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// idle is how long the connections below carry no data: longer than the idle timeout YoMo's
// zipper advertises (5 s) and than y3's (5 s), so a connection that lives through it is kept
// up by QUIC keep-alives, not by traffic.
const idle = 12 * time.Second

// The idle tests wait out idle, so they run in parallel, with each other only: no other test
// of this package is parallel (and none of these routers has a token, which YoMo keeps
// process-wide).

// Clients connected and idle for longer than any idle timeout are still connected: a YoMo
// source, a YoMo sink and (with $Y3_BIN) `y3 observe` over QUIC send or receive one message,
// sit idle, then ten more arrive exactly once, and no client reconnected: the router took in
// no new connection, YoMo's zipper saw each client's handshake id -0 only, and YoMo reported
// no error to its clients. The yomo row is y3's client against YoMo's zipper.
func TestIdleConnections(t *testing.T) {
	t.Parallel()
	for _, kind := range harness.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			const after = 10
			const observeName = "y3-observe-idle"
			r := harness.Start(t, kind, harness.Options{})
			sk := sink(t, r, "idle-sink", tagIn)
			var observe *harness.Process
			if bin := os.Getenv(harness.Y3BinEnv); bin != "" {
				// Probes make the number of frames it prints unknown: no --count, it is
				// stopped at cleanup.
				observe = harness.StartProcess(t, nil, nil, bin, "observe", "--addr", r.Addr(), "--transport", "quic",
					"--insecure", "--tag", "0x33", "--name", observeName)
			}
			src := harness.Source(t, harness.Client(r, "idle-source", ""))
			ctx := bounded(t, 10*time.Second)
			// `y3 observe` says nothing when it is connected: probe until it prints a frame.
			seen := map[uint64]int{}
			if observe != nil {
				probeObserve(t, ctx, src, observe, seen)
			}
			writeBatch(t, src, tagIn, 0, 1, 64, "")
			waitRange(t, ctx, sk, 0, 1)
			if observe != nil {
				readObserved(t, ctx, observe, seen, 0, 1)
			}
			counter := r.(harness.ConnCounter)
			before, err := counter.AcceptedConnections()
			clients := 2
			if observe != nil {
				clients++
			}
			if err != nil || before < clients {
				t.Fatalf("%s router counts %d accepted connections (%v), want at least the %d clients", kind, before, err, clients)
			}

			time.Sleep(idle)
			ctx = bounded(t, 10*time.Second)
			// YoMo's Write blocks while its client reconnects: bound it.
			within(t, ctx, "YoMo source writes", func() { writeBatch(t, src, tagIn, 1, after, 64, "") })
			waitRange(t, ctx, sk, 1, after)
			if observe != nil {
				readObserved(t, ctx, observe, seen, 1, after)
			}
			settle()

			// Probes (to y3 observe) reached the sink too, each once.
			if rep := sk.Tracker.Report(0, 1+after); rep.Missing != 0 || rep.Duplicates != 0 ||
				!rep.TidOK || !rep.SourceIDOK || len(rep.SourceIDs) != 1 {
				t.Errorf("YoMo sink: want %d messages exactly once, got %+v", 1+after, rep)
			}
			if now, err := counter.AcceptedConnections(); err != nil || now != before {
				t.Errorf("%s router took in %d connections before the idle time and %d after (%v): a client reconnected",
					kind, before, now, err)
			}
			for name, last := range map[string]error{"source": src.LastError(), "sink": sk.LastError()} {
				if last != nil {
					t.Errorf("YoMo %s reported %v", name, last)
				}
			}
			if obs, ok := r.(harness.Observer); ok {
				names := []string{"idle-source", "idle-sink"}
				if observe != nil {
					names = append(names, observeName)
				}
				for _, name := range names {
					checkOneConnection(t, obs, name)
				}
			}
		})
	}
}

// `y3 send` reading its lines from a pipe that stays open: a line is sent when it is read,
// not when the input ends, and the connection outlives a pause in the input longer than the
// idle timeout. Needs $Y3_BIN.
func TestY3SendIdle(t *testing.T) {
	t.Parallel()
	bin := harness.Y3Bin(t)
	// Found by this test: `y3 send` read stdin with blocking calls on its runtime's only
	// thread, so nothing was written until the input ended and the idle connection was lost.
	for _, kind := range harness.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			const after = 10
			r := harness.Start(t, kind, harness.Options{})
			sk := sink(t, r, "idle-sink", tagIn)
			// An OS pipe, handed to the child as it is: with an io.Reader, exec's Wait would
			// wait for a copying goroutine that only the end of the input stops.
			stdin, lines, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = stdin.Close(), lines.Close() })
			send := harness.StartProcess(t, stdin, nil, bin, "send", "--addr", r.Addr(), "--transport", "quic",
				"--insecure", "--tag", "0x33", "--name", "y3-send-idle")
			writeLines := func(from uint64, n int) {
				var text strings.Builder
				for seq := from; seq < from+uint64(n); seq++ {
					fmt.Fprintf(&text, "{\"payload_hex\":%q}\n", hex.EncodeToString(peer.Stamp(seq, time.Now(), 48)))
				}
				if _, err := io.WriteString(lines, text.String()); err != nil {
					t.Errorf("y3 send's stdin: %v", err)
				}
			}
			ctx := bounded(t, 10*time.Second)
			within(t, ctx, "y3 send's stdin", func() { writeLines(0, 1) })
			waitRange(t, ctx, sk, 0, 1)

			time.Sleep(idle)
			ctx = bounded(t, 10*time.Second)
			within(t, ctx, "y3 send's stdin", func() { writeLines(1, after) })
			_ = lines.Close()
			rep, code := finalReport(t, send, "", 10*time.Second)
			if code != 0 || rep["sent"] != float64(1+after) {
				t.Errorf("y3 send: exit %d, %v; want exit 0, %d sent\nstderr:\n%s", code, rep, 1+after, send.Stderr())
			}
			waitRange(t, ctx, sk, 1, after)
			settle()
			if rep := sk.Tracker.Report(0, 1+after); rep.Received != 1+after || rep.Duplicates != 0 {
				t.Errorf("YoMo sink: want %d messages exactly once, got %+v", 1+after, rep)
			}
			if obs, ok := r.(harness.Observer); ok {
				checkOneConnection(t, obs, "y3-send-idle")
			}
		})
	}
}

// within runs call (which may call t.Fatal) and fails the test if it has not returned when
// ctx ends.
func within(t *testing.T, ctx context.Context, what string, call func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		call()
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("%s did not return: %v", what, ctx.Err())
	}
}

// probeObserve writes probes (seq probeSeq, probeSeq+1, ...) every 100 ms until `y3 observe`
// printed one, so that it is known to be connected.
func probeObserve(t *testing.T, ctx context.Context, src *peer.Source, p *harness.Process, seen map[uint64]int) {
	t.Helper()
	for seq := probeSeq; ; seq++ {
		if err := src.WriteStamped(tagIn, seq, 32, ""); err != nil {
			t.Fatalf("probe: %v", err)
		}
		select {
		case line, ok := <-p.Lines():
			if !ok {
				t.Fatalf("y3 observe ended before printing a probe\nstderr:\n%s", p.Stderr())
			}
			observedSeq(t, line, seen)
			return
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			t.Fatalf("y3 observe printed no probe: %v\nstderr:\n%s", ctx.Err(), p.Stderr())
		}
	}
}

// readObserved reads `y3 observe` lines into seen until every seq in [from, from+n) is there.
func readObserved(t *testing.T, ctx context.Context, p *harness.Process, seen map[uint64]int, from uint64, n int) {
	t.Helper()
	for seq := from; seq < from+uint64(n); {
		if seen[seq] > 0 {
			seq++
			continue
		}
		select {
		case line, ok := <-p.Lines():
			if !ok {
				t.Fatalf("y3 observe ended before seq %d\nstderr:\n%s", seq, p.Stderr())
			}
			observedSeq(t, line, seen)
		case <-ctx.Done():
			t.Fatalf("y3 observe printed no seq %d: %v\nstderr:\n%s", seq, ctx.Err(), p.Stderr())
		}
	}
	for seq := from; seq < from+uint64(n); seq++ {
		if seen[seq] != 1 {
			t.Errorf("y3 observe printed seq %d %d times", seq, seen[seq])
		}
	}
}

// observedSeq counts the sequence number of a `y3 observe` line in seen.
func observedSeq(t *testing.T, line string, seen map[uint64]int) {
	t.Helper()
	tag, payload, err := observedFrame(line)
	if err != nil {
		t.Fatalf("y3 observe line %q: %v", line, err)
	}
	seq, _, stamped := peer.Unstamp(payload)
	if tag != tagIn || !stamped {
		t.Fatalf("y3 observe line %q: tag %#x; want %#x and a stamped payload", line, tag, tagIn)
	}
	seen[seq]++
}

// checkOneConnection fails the test unless the client named name handshook exactly once,
// with the id suffix -0 (YoMo counts a client's connections in the suffix).
func checkOneConnection(t *testing.T, obs harness.Observer, name string) {
	t.Helper()
	ids := obs.ClientIDs(name)
	if len(ids) != 1 || !strings.HasSuffix(ids[0], "-0") {
		t.Errorf("%s handshook with ids %v, want one id ending -0 (no reconnect)", name, ids)
	}
}
