package interop_test

import (
	"testing"
	"time"

	"github.com/y3-dev/y3/interop/yomo/internal/harness"
	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// YoMo clients created with reconnect survive a router restart on the same address: they
// reconnect by themselves and what is sent after the restart arrives.
//
// How they learn of the restart differs. y3 closes every connection on SIGTERM with a code
// that is not 0x13, so YoMo reconnects at once. A stopping YoMo zipper sends nothing (`yomo
// serve` exits in its signal handler; here the in-process zipper's socket is closed), so its
// clients wait out the 5 s QUIC idle timeout first.
func TestRestart(t *testing.T) {
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		const n = 100
		r := harness.Start(t, kind, harness.Options{})
		sinkCC := harness.Client(r, "sink", "")
		sinkCC.Reconnect = true
		sk := harness.Sink(t, peer.FunctionConfig{ClientConfig: sinkCC, Observe: []uint32{tagIn}})
		srcCC := harness.Client(r, "source", "")
		srcCC.Reconnect = true
		src := harness.Source(t, srcCC)

		writeBatch(t, src, tagIn, 0, n, 64, "")
		waitRange(t, bounded(t, 10*time.Second), sk, 0, n)

		addr := r.Addr()
		r.Restart()
		if r.Addr() != addr {
			t.Fatalf("restarted on %s, want %s", r.Addr(), addr)
		}
		start := time.Now()
		ctx := bounded(t, 25*time.Second)
		// Frames written before the source notices the restart are lost with the old
		// connection; probes tell when source, router and sink are connected again.
		probeUntil(t, ctx, src, tagIn, sk)
		t.Logf("%s: path rebuilt %.1f s after the restart", kind, time.Since(start).Seconds())

		writeBatch(t, src, tagIn, n, n, 64, "")
		waitRange(t, ctx, sk, n, n)
		if rep := sk.Tracker.Report(0, 2*n); rep.Missing != 0 || !rep.TidOK || !rep.SourceIDOK {
			t.Errorf("after the restart: %+v", rep)
		}
	})
}
