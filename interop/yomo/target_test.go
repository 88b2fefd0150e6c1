package interop_test

import (
	"testing"
	"time"

	"github.com/y3-dev/y3/interop/yomo/internal/harness"
	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// WriteWithTarget (metadata yomo-target) reaches only the stream functions whose wanted
// target equals it; a function without a wanted target gets no targeted frame; an
// untargeted frame reaches every observer, wanted target or not (PROTOCOL.md §2.7).
func TestWriteWithTarget(t *testing.T) {
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		const n = 20
		r := harness.Start(t, kind, harness.Options{})
		a, b, plain := wanting(t, r, "sfn-a", "a"), wanting(t, r, "sfn-b", "b"), wanting(t, r, "sfn-plain", "")
		src := harness.Source(t, harness.Client(r, "source", ""))

		// Batches by sequence number: 0.. to "a", 100.. to "b", 200.. to nobody's target,
		// 300.. untargeted. Untargeted last: once every function has those, every frame
		// written before them to the same function has been delivered too (per producer
		// and consumer, the wire order holds).
		writeBatch(t, src, tagIn, 0, n, 32, "a")
		writeBatch(t, src, tagIn, 100, n, 32, "b")
		writeBatch(t, src, tagIn, 200, n, 32, "nobody")
		writeBatch(t, src, tagIn, 300, n, 32, "")

		ctx := bounded(t, 15*time.Second)
		waitRange(t, ctx, a, 0, n)
		waitRange(t, ctx, b, 100, n)
		for _, sk := range []*peer.Sink{a, b, plain} {
			waitRange(t, ctx, sk, 300, n)
		}
		settle()

		exactBatches(t, n, map[string]batches{
			"sfn-a":     {a, []uint64{0, 300}},
			"sfn-b":     {b, []uint64{100, 300}},
			"sfn-plain": {plain, []uint64{300}},
		})
	})
}

// wanting starts a YoMo stream function on r observing tagIn with wanted target wanted
// ("" for none), which records what it receives.
func wanting(t *testing.T, r harness.Router, name, wanted string) *peer.Sink {
	return harness.Sink(t, peer.FunctionConfig{
		ClientConfig: harness.Client(r, name, ""),
		Observe:      []uint32{tagIn},
		WantedTarget: wanted,
	})
}

// batches is what one function must receive: each batch of n sequence numbers from these
// starts exactly once, and no other frame.
type batches struct {
	sk   *peer.Sink
	from []uint64
}

// exactBatches checks each named function got exactly its batches of n: all of them, no
// duplicates, no bad payloads, nothing else.
func exactBatches(t *testing.T, n int, want map[string]batches) {
	t.Helper()
	for name, w := range want {
		rep := w.sk.Tracker.Report(0, 0)
		if rep.Received != n*len(w.from) || rep.Duplicates != 0 || rep.BadPayloads != 0 {
			t.Errorf("%s: received %d (duplicates %d, bad payloads %d), want %d: batches %v",
				name, rep.Received, rep.Duplicates, rep.BadPayloads, n*len(w.from), w.from)
		}
		for _, from := range w.from {
			if missing := w.sk.Tracker.Missing(from, n); missing != 0 {
				t.Errorf("%s: %d of batch %d missing", name, missing, from)
			}
		}
	}
}
