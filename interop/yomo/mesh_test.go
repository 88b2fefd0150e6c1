package interop_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/y3-dev/y3/interop/yomo/internal/harness"
	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// Mesh: router A forwards every frame of its local clients to downstream router B, which
// it dials as a YoMo UpstreamZipper (0x5E) client; B delivers to its own stream functions
// and never forwards back. A source on A reaches a sink on B (and one on A) exactly once.
// A y3 router on the A side reads its mesh from the [mesh] section of the TOML config the
// harness writes (`y3 serve --config FILE`).
func TestMesh(t *testing.T) {
	for _, pair := range []struct{ a, b harness.Kind }{
		{harness.YoMo, harness.YoMo},
		{harness.YoMo, harness.Y3}, // y3 as the downstream of a YoMo zipper
		{harness.Y3, harness.YoMo}, // y3 dialing a YoMo zipper
		{harness.Y3, harness.Y3},
	} {
		t.Run(fmt.Sprintf("%s-to-%s", pair.a, pair.b), func(t *testing.T) {
			const n = 500
			b := harness.Start(t, pair.b, harness.Options{Name: "zipper-b"})
			a := harness.Start(t, pair.a, harness.Options{
				Name: "zipper-a",
				Mesh: []peer.MeshPeer{{Name: "zipper-b", Addr: b.Addr()}},
			})
			onB := sink(t, b, "sink-b", tagIn)
			onA := sink(t, a, "sink-a", tagIn)
			src := harness.Source(t, harness.Client(a, "source", ""))

			// The mesh link dials B in the background; probe until it carries frames.
			ctx := bounded(t, 20*time.Second)
			if obs, ok := b.(harness.Observer); ok {
				// A dials B under its own name (y3: the [mesh] name of its config).
				if err := obs.WaitConnected(ctx, "zipper-a"); err != nil {
					t.Fatalf("no mesh link named zipper-a reached B: %v", err)
				}
			}
			probeUntil(t, ctx, src, tagIn, onB)
			writeBatch(t, src, tagIn, 0, n, 64, "")
			waitRange(t, ctx, onB, 0, n)
			waitRange(t, ctx, onA, 0, n)
			settle()
			for name, sk := range map[string]*peer.Sink{"sink-a": onA, "sink-b": onB} {
				rep := sk.Tracker.Report(0, n)
				if rep.Duplicates != 0 || !rep.TidOK || !rep.SourceIDOK || len(rep.SourceIDs) != 1 {
					t.Errorf("%s: %+v", name, rep)
				}
			}
		})
	}
}
