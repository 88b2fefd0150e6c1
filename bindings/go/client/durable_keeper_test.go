package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/y3-dev/y3/bindings/go/client"
)

// The durable source's keeper (a goroutine it owns) reconnects and writes again by itself:
// these tests make no call on the source between the router's death and the count.

// keeperOpts reconnects quickly and never gives up while the router is down.
func keeperOpts(name string) client.Options {
	o := opts(name)
	o.Backoff = client.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	return o
}

// goroutinesIn is how many goroutines have a frame whose function name contains fn in
// their stack (a hand-written goleak: runtime.Stack of every goroutine).
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte(fn)) {
			count++
		}
	}
	return count
}

// durableGoroutines names the functions a durable source runs goroutines in: its keeper,
// its readers, and the writers of its links (in tests without another client).
const durableGoroutines = "client.(*DurableSource)."

// keeper is the function of a durable source's keeper goroutine.
const keeper = "client.(*DurableSource).keep("

// waitNoGoroutines waits (a loaded machine: up to 5 s) until no goroutine runs in fn.
func waitNoGoroutines(t *testing.T, fn string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for goroutinesIn(fn) > 0 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines still run in %s after Close:\n%s", goroutinesIn(fn), fn, buf)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A DurableSource whose router is SIGSTOPped halfway through 5,000 frames (the rest wait in
// the source), then SIGKILLed and restarted on the same port, has all 5,000 delivered to a
// reconnecting sink with no further call: its keeper reconnects, writes every kept frame
// again in order, and retries those the router answered no_subscriber (the source usually
// reconnects before the sink). Plain tags are at least once: a frame the sink got before
// the kill but the router had not yet acknowledged arrives twice (counted, logged).
func TestDurableSourceResendsByItself(t *testing.T) {
	findRouter(t)
	const tag = 0x71
	const n = 5000
	ro := routerOpts{token: token, tcp: fmt.Sprintf("127.0.0.1:%d", freePort(t)), metrics: true}
	r := startRouter(t, ro)

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	sink, err := client.ConnectSink(ctx, r.tcp, keeperOpts("keeper-sink"), []uint32{tag})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	waitFor(t, "the sink", func() bool { return r.metric("y3_router_connections") >= 1 })
	got := receiveNumbers(ctx, t, sink, tag, n)

	src, err := client.ConnectDurableSource(ctx, r.tcp, keeperOpts("keeper-source"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if i == n/2 {
			// The router reads nothing from here on: the rest waits in the source.
			if err := r.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := src.SendContext(ctx, tag, []byte(strconv.Itoa(i))); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	unackedAtKill := src.Unacked()
	_ = r.cmd.Process.Kill()
	if err := r.wait(5 * time.Second); err == nil {
		t.Fatal("the router exited cleanly after SIGKILL")
	}
	time.Sleep(100 * time.Millisecond)
	startRouter(t, ro)

	// No call on the source from the kill until every frame has arrived (or a minute).
	seen := make(map[int]int)
	var firsts []int // each number at its first arrival, in arrival order
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
count:
	for len(seen) < n {
		select {
		case i, ok := <-got:
			if !ok {
				break count
			}
			if seen[i] == 0 {
				firsts = append(firsts, i)
			}
			seen[i]++
		case <-deadline.C:
			break count
		}
	}
	time.Sleep(300 * time.Millisecond) // late second copies
	for len(got) > 0 {
		seen[<-got]++
	}
	missing, twice := tally(seen, n)
	t.Logf("sent %d, %d not stored at the kill; the sink got %d distinct before any further call "+
		"(%d missing, %d twice); resent %d, retried %d",
		n, unackedAtKill, len(seen), len(missing), len(twice), src.Resent(), src.Retried())
	if unackedAtKill < n/2 {
		t.Errorf("only %d frames were kept at the kill: the test did not stop the router mid-stream", unackedAtKill)
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d frames never arrived (first %v): the source did not resend by itself",
			len(missing), n, head(missing))
	}
	if src.Resent() == 0 {
		t.Error("nothing was written again")
	}
	// Written again in order: without retries (which put a frame nobody took after newer
	// ones, by design), every frame first arrives in the order sent.
	if src.Retried() == 0 {
		for k, i := range firsts {
			if i != k {
				t.Fatalf("frame %d arrived %dth for the first time: out of order", i, k)
			}
		}
	}
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	if err := src.Close(cctx); err != nil {
		t.Fatalf("close: %v (unacked %d)", err, src.Unacked())
	}
	waitNoGoroutines(t, durableGoroutines)
}

// Close stops the keeper even while it reconnects to a router that is gone (the backoff
// never gives up): no goroutine of the source outlives Close, and Close keeps to its
// context.
func TestDurableSourceCloseStopsTheKeeper(t *testing.T) {
	findRouter(t)
	r := startRouter(t, routerOpts{token: token})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	before := runtime.NumGoroutine()

	// Connected: Close after frames were stored.
	src, err := client.ConnectDurableSource(ctx, r.tcp, keeperOpts("keeper-close"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the keeper goroutine", func() bool { return goroutinesIn(keeper) == 1 })
	// Nobody subscribes: the frames are kept (no_subscriber) and retried by the keeper.
	for i := range 10 {
		if _, err := src.Send(0x72, []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the keeper's retries", func() bool { return src.Retried() > 10 })
	cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = src.Close(cctx)
	ccancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close with frames nobody took: %v, want the context's deadline", err)
	}
	waitNoGoroutines(t, durableGoroutines)

	// Reconnecting forever to a router that is gone, with a frame kept: written while the
	// router was stopped, then lost with it.
	src, err = client.ConnectDurableSource(ctx, r.tcp, keeperOpts("keeper-close"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Send(0x72, []byte("lost with the router")); err != nil {
		t.Fatal(err)
	}
	_ = r.cmd.Process.Kill()
	_ = r.wait(5 * time.Second)
	// Until the source's reader sees the connection end, a send is written to the dead
	// socket and kept (at least once, resent later); once it has, a send waits for a
	// connection and keeps to its context.
	gone := time.Now().Add(5 * time.Second)
	for {
		sctx, scancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err = src.SendContext(sctx, 0x72, []byte("late"))
		scancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatalf("send to a router that is gone: %v, want the context's deadline", err)
		}
		if time.Now().After(gone) {
			t.Fatalf("sends to a router killed 5 s ago still return at once (unacked %d)", src.Unacked())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := goroutinesIn(keeper); got != 1 {
		t.Fatalf("%d keeper goroutines, want 1", got)
	}
	cctx, ccancel = context.WithTimeout(ctx, 500*time.Millisecond)
	start := time.Now()
	err = src.Close(cctx)
	ccancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close while reconnecting: %v, want the context's deadline", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("close took %v past its 500 ms context", took)
	}
	if _, err := src.Send(0x72, nil); client.KindOf(err) != client.KindClosed {
		t.Fatalf("send after close: %v", err)
	}
	waitNoGoroutines(t, durableGoroutines)
	waitNoGoroutines(t, "client.(*link).writeLoop")
	// Nothing else of the client is left either (the router harness's goroutines end
	// with the killed process).
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(),
				strings.TrimSpace(string(buf)))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
