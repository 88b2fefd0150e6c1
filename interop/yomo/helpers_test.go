package interop_test

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/y3-dev/y3/interop/yomo/internal/harness"
	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// Tags used throughout: sources write tagIn, relays emit tagOut.
const (
	tagIn  uint32 = 0x33
	tagOut uint32 = 0x34
	// probeSeq is the first sequence number of probes, messages sent until the far end is
	// known to be reachable; real batches use small sequence numbers.
	probeSeq uint64 = 1_000_000
)

// forKinds runs body as one subtest per router kind.
func forKinds(t *testing.T, body func(t *testing.T, kind harness.Kind)) {
	for _, kind := range harness.Kinds {
		t.Run(string(kind), func(t *testing.T) { body(t, kind) })
	}
}

// bounded returns a context that ends after d or at test cleanup.
func bounded(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// sink connects a counting stream function named name observing tags.
func sink(t *testing.T, r harness.Router, name string, tags ...uint32) *peer.Sink {
	t.Helper()
	return harness.Sink(t, peer.FunctionConfig{ClientConfig: harness.Client(r, name, ""), Observe: tags})
}

// writeBatch writes seqs [from, from+n) under tag with payloads of size bytes; every Write
// must succeed.
func writeBatch(t *testing.T, src *peer.Source, tag uint32, from uint64, n, size int, target string) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := src.WriteStamped(tag, from+uint64(i), size, target); err != nil {
			t.Fatalf("write seq %d: %v", from+uint64(i), err)
		}
	}
}

// waitRange waits until sk has every seq in [from, from+n) or fails the test with a report.
func waitRange(t *testing.T, ctx context.Context, sk *peer.Sink, from uint64, n int) {
	t.Helper()
	if err := sk.Tracker.WaitRange(ctx, from, n); err != nil {
		t.Fatalf("%d of seqs [%d, %d) missing: %v; report %+v",
			sk.Tracker.Missing(from, n), from, from+uint64(n), err, sk.Tracker.Report(from, n))
	}
}

// settle gives frames still in flight (YoMo runs each SFN handler call in its own goroutine)
// time to arrive before a test asserts that something did NOT arrive.
func settle() { time.Sleep(300 * time.Millisecond) }

// probeUntil writes probes (seq probeSeq, probeSeq+1, ...) under tag every 100 ms until sk
// received one, so that a path that is being (re)built — a reconnecting client, a mesh link
// dialing — is known to work before the real batch. Writes run on their own goroutine:
// YoMo's Write blocks while the client reconnects.
func probeUntil(t *testing.T, ctx context.Context, src *peer.Source, tag uint32, sk *peer.Sink) {
	t.Helper()
	done := make(chan struct{})
	defer close(done)
	go func() {
		for seq := probeSeq; ; seq++ {
			_ = src.WriteStamped(tag, seq, 32, "")
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	if err := waitAnyProbe(ctx, sk); err != nil {
		t.Fatalf("no probe arrived: %v (last source error: %v, sink error: %v)", err, src.LastError(), sk.LastError())
	}
}

// waitAnyProbe waits for any seq >= probeSeq.
func waitAnyProbe(ctx context.Context, sk *peer.Sink) error {
	for {
		if sk.Tracker.MaxSeq() >= probeSeq {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// idCapture is a logger for a YoMo client that records the client id YoMo attaches to it
// (NewSource logs with "source_id", NewStreamFunction with "sfn_id"): the only way to learn
// a yomo.Source's id from outside.
type idCapture struct {
	slog.Handler
	mu *sync.Mutex
	id *string
}

// newIDCapture returns the logger and a function reading the captured id.
func newIDCapture() (*slog.Logger, func() string) {
	h := idCapture{
		Handler: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}),
		mu:      &sync.Mutex{},
		id:      new(string),
	}
	return slog.New(h), func() string {
		h.mu.Lock()
		defer h.mu.Unlock()
		return *h.id
	}
}

func (h idCapture) WithAttrs(attrs []slog.Attr) slog.Handler {
	h.mu.Lock()
	for _, a := range attrs {
		if a.Key == "source_id" || a.Key == "sfn_id" {
			*h.id = a.Value.String()
		}
	}
	h.mu.Unlock()
	return idCapture{Handler: h.Handler.WithAttrs(attrs), mu: h.mu, id: h.id}
}
