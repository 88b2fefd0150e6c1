package interop_test

import (
	"context"
	"testing"
	"time"

	y3 "github.com/y3-dev/y3/bindings/go"
	"github.com/y3-dev/y3/interop/yomo/internal/harness"
	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// An unmodified YoMo stream function gets a content filter from the y3 router's config
// ([[filters.attach]] by function name and tag, spec/filters.md): of 100 readings written by
// YoMo's source it receives exactly the 39 above 60, while an unfiltered YoMo function gets
// all 100. Only y3 has filters; the YoMo row skips.
func TestConfigFilterOnAYoMoFunction(t *testing.T) {
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		const n, loud = 100, 39
		r := harness.Start(t, kind, harness.Options{Filters: []harness.Filter{
			{Function: "sfn-loud", Tag: tagIn, Text: "0x11 > 60"},
		}})
		filtered := sink(t, r, "sfn-loud", tagIn)
		all := sink(t, r, "sfn-all", tagIn)
		src := harness.Source(t, harness.Client(r, "source", ""))
		// Readings 0..99 as Y3: one int64 packet 0x11 (what y3.Marshal writes for an int).
		for i := range n {
			payload, err := y3.AppendInt64(nil, y3.Golang, 0x11, int64(i))
			if err != nil {
				t.Fatal(err)
			}
			if err := src.Write(tagIn, payload, ""); err != nil {
				t.Fatal(err)
			}
		}
		ctx := bounded(t, 15*time.Second)
		waitReceived(t, ctx, all, n)
		waitReceived(t, ctx, filtered, loud)
		settle()
		if got := all.Tracker.Received(); got != n {
			t.Errorf("unfiltered function: %d frames, want %d", got, n)
		}
		if got := filtered.Tracker.Received(); got != loud {
			t.Errorf("filtered function: %d frames, want exactly %d (readings 61..99)", got, loud)
		}
	})
}

// waitReceived waits until sk has received at least n frames.
func waitReceived(t *testing.T, ctx context.Context, sk *peer.Sink, n int) {
	t.Helper()
	for sk.Tracker.Received() < n {
		select {
		case <-ctx.Done():
			t.Fatalf("received %d of %d frames", sk.Tracker.Received(), n)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
