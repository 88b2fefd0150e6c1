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
// that is not 0x13, so YoMo's clients start reconnecting at once; while the router is down
// each failed attempt costs them 2 s (YoMo's client sleeps 1 s twice), so the path is back
// within about 2-3 s of the new router listening (2.7 s measured), and the y3 row asserts it
// is back before the 5 s QUIC idle timeout could have passed. A stopping YoMo zipper sends
// nothing (`yomo serve` exits in its signal handler; here the in-process zipper's socket is
// closed), so its clients wait out that idle timeout first (7.6 s measured).
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
		rebuilt := time.Since(start)
		t.Logf("%s: path rebuilt %.1f s after the restart", kind, rebuilt.Seconds())
		if kind == harness.Y3 && rebuilt >= quicIdleTimeout {
			t.Errorf("y3: path rebuilt %.1f s after the restart: the clients waited out the %v idle timeout instead of reconnecting at once",
				rebuilt.Seconds(), quicIdleTimeout)
		}

		writeBatch(t, src, tagIn, n, n, 64, "")
		waitRange(t, ctx, sk, n, n)
		if rep := sk.Tracker.Report(0, 2*n); rep.Missing != 0 || !rep.TidOK || !rep.SourceIDOK {
			t.Errorf("after the restart: %+v", rep)
		}
	})
}

// quicIdleTimeout is the QUIC idle timeout YoMo v1.22's clients get from a zipper (its
// server default, 5 s; the clients ask for 40 s, the lower wins): a client that is not told
// of a restart notices it only after this long.
const quicIdleTimeout = 5 * time.Second
