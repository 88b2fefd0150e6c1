package interop_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/y3-dev/y3/interop/yomo/internal/harness"
	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// A YoMo source's frames reach a YoMo sink exactly once, with YoMo's metadata intact: a
// fresh yomo-tid per message and yomo-source-id = the source's id without its -N suffix.
func TestSourceToSink(t *testing.T) {
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		const n, size = 2000, 64
		r := harness.Start(t, kind, harness.Options{})
		sk := sink(t, r, "sink", tagIn)
		logger, sourceID := newIDCapture()
		cc := harness.Client(r, "source", "")
		cc.Logger = logger
		src := harness.Source(t, cc)

		writeBatch(t, src, tagIn, 0, n, size, "")
		waitRange(t, bounded(t, 15*time.Second), sk, 0, n)
		settle()

		rep := sk.Tracker.Report(0, n)
		if rep.Received != n || rep.Duplicates != 0 || rep.Missing != 0 || rep.BadPayloads != 0 {
			t.Errorf("want exactly %d frames once each, got %+v", n, rep)
		}
		if !rep.TidOK || rep.DistinctTids != n {
			t.Errorf("want a distinct yomo-tid on each of %d frames: tid_ok=%v distinct=%d", n, rep.TidOK, rep.DistinctTids)
		}
		id := sourceID()
		if len(id) != 21 {
			t.Fatalf("captured source id %q is not a 21-character nanoid", id)
		}
		if !rep.SourceIDOK || !slices.Equal(rep.SourceIDs, []string{id}) {
			t.Errorf("want yomo-source-id %q on every frame, got ok=%v ids=%v", id, rep.SourceIDOK, rep.SourceIDs)
		}
		if obs, ok := r.(harness.Observer); ok {
			ids := obs.ClientIDs("source")
			if len(ids) != 1 || ids[0] != id+"-0" || strings.TrimSuffix(ids[0], "-0") != rep.SourceIDs[0] {
				t.Errorf("handshake ids %v, want [%s-0]", ids, id)
			}
		}
		if rep.Tags[peer.FormatTag(tagIn)] != n {
			t.Errorf("tags %v, want %d under %s", rep.Tags, n, peer.FormatTag(tagIn))
		}
	})
}

// Source -> relay stream function (0x33 -> 0x34, YoMo's ctx.Write) -> sink: exact counts,
// and the relay keeps the source's metadata.
func TestSourceRelaySink(t *testing.T) {
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		const n, size = 1000, 128
		r := harness.Start(t, kind, harness.Options{})
		sk := sink(t, r, "sink", tagOut)
		relay := harness.Relay(t, peer.RelayConfig{
			FunctionConfig: peer.FunctionConfig{ClientConfig: harness.Client(r, "relay", ""), Observe: []uint32{tagIn}},
			Emit:           tagOut,
		})
		src := harness.Source(t, harness.Client(r, "source", ""))

		writeBatch(t, src, tagIn, 0, n, size, "")
		waitRange(t, bounded(t, 15*time.Second), sk, 0, n)
		settle()

		rep := sk.Tracker.Report(0, n)
		if rep.Received != n || rep.Duplicates != 0 || rep.Missing != 0 {
			t.Errorf("sink: want exactly %d frames once each, got %+v", n, rep)
		}
		if got := relay.Report(); got.Received != n || got.Relayed != n || got.Errors != 0 {
			t.Errorf("relay: want %d received and relayed, got %+v", n, got)
		}
		if !rep.TidOK || rep.DistinctTids != n || !rep.SourceIDOK || len(rep.SourceIDs) != 1 {
			t.Errorf("metadata not carried through the relay: %+v", rep)
		}
		if rep.Tags[peer.FormatTag(tagOut)] != n || len(rep.Tags) != 1 {
			t.Errorf("tags %v, want only %s", rep.Tags, peer.FormatTag(tagOut))
		}
	})
}
