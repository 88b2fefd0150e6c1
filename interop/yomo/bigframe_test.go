package interop_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/y3-dev/y3/interop/yomo/internal/harness"
)

// y3SkippedMetric counts frames y3 read past without routing them, by reason.
const y3SkippedMetric = "y3_router_skipped_frames_total"

// Payloads of 4 MiB and 16 MiB from a YoMo source reach a YoMo sink, and so does the
// ordinary write after them, on the routers' defaults; the source never reconnects.
func TestBigPayloads(t *testing.T) {
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		r := harness.Start(t, kind, harness.Options{})
		sk := sink(t, r, "big-sink", tagIn)
		src := harness.Source(t, harness.Client(r, "big-source", ""))
		counter := r.(harness.ConnCounter)
		before, err := counter.AcceptedConnections()
		if err != nil {
			t.Fatal(err)
		}
		sizes := []int{4 << 20, 16 << 20, 64}
		for seq, size := range sizes {
			if err := src.WriteStamped(tagIn, uint64(seq), size, ""); err != nil {
				t.Fatalf("write %d bytes: %v", size, err)
			}
		}
		waitRange(t, bounded(t, 60*time.Second), sk, 0, len(sizes))
		settle()
		if rep := sk.Tracker.Report(0, len(sizes)); rep.Missing != 0 || rep.Duplicates != 0 {
			t.Errorf("%s: %+v", kind, rep)
		}
		after, err := counter.AcceptedConnections()
		if err != nil || after != before {
			t.Errorf("%s: accepted connections %d -> %d (%v): a client reconnected", kind, before, after, err)
		}
		if err := src.LastError(); err != nil {
			t.Errorf("%s: the source saw %v", kind, err)
		}
	})
}

// A frame over y3's configured `max_frame_len` (64 KiB here) is skipped as it streams in
// and counted; the YoMo source's connection stays up (no close, no reconnect) and its next
// writes arrive. YoMo's zipper has no limit: as the control, it delivers all of them.
func TestFrameOverLimitIsSkipped(t *testing.T) {
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		const limit = 64 << 10
		r := harness.Start(t, kind, harness.Options{
			Config: fmt.Sprintf("[limits]\nmax_frame_len = %d", limit),
		})
		sk := sink(t, r, "limit-sink", tagIn)
		src := harness.Source(t, harness.Client(r, "limit-source", ""))
		counter := r.(harness.ConnCounter)
		before, err := counter.AcceptedConnections()
		if err != nil {
			t.Fatal(err)
		}
		// seq 0: 1 MiB, over the limit; then ten ordinary writes.
		if err := src.WriteStamped(tagIn, 0, 1<<20, ""); err != nil {
			t.Fatalf("write 1 MiB: %v", err)
		}
		writeBatch(t, src, tagIn, 1, 10, 64, "")
		waitRange(t, bounded(t, 30*time.Second), sk, 1, 10)
		settle()
		got := sk.Tracker.SeqCount(0)
		switch kind {
		case harness.Y3:
			if got != 0 {
				t.Errorf("y3 delivered the frame over its limit %d times", got)
			}
			skipped, err := r.(harness.Counters).Counter(y3SkippedMetric)
			if err != nil || skipped != 1 {
				t.Errorf("%s = %d (%v), want 1", y3SkippedMetric, skipped, err)
			}
		default:
			if got != 1 {
				t.Errorf("YoMo's zipper delivered the 1 MiB frame %d times, want 1", got)
			}
		}
		after, err := counter.AcceptedConnections()
		if err != nil || after != before {
			t.Errorf("%s: accepted connections %d -> %d (%v): a client reconnected", kind, before, after, err)
		}
		if err := src.LastError(); err != nil {
			t.Errorf("%s: the source saw %v", kind, err)
		}
		if err := src.RemoteClose(); err != nil {
			t.Errorf("%s: the source was closed for good: %v", kind, err)
		}
	})
}
