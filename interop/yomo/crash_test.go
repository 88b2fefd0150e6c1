package interop_test

import (
	"sync"
	"testing"
	"time"

	"github.com/y3-dev/y3/interop/yomo/internal/harness"
	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// crashResult is what a router crash cost a YoMo source writing every crashWriteEvery.
type crashResult struct {
	// firstDelivery is the time from the new router listening to the first frame the sink
	// received after it.
	firstDelivery time.Duration
	// restart is the time from the old router gone to the new one listening.
	restart time.Duration
	// lost counts writes that returned nil but never reached the sink.
	lost int
	// written counts writes that returned nil.
	written int
}

const (
	crashWriteEvery = 20 * time.Millisecond
	// crashTail is how long the source goes on writing once the sink received again.
	crashTail = 2 * time.Second
)

// A router crashes (y3: SIGKILL; YoMo's zipper: its socket closed, as a killed `yomo
// serve`) and is restarted at once on the same address, while a YoMo source writes every
// 20 ms to a YoMo sink, both with reconnect on. Measured for both routers in the same run:
// the time from the new router listening to the first delivery, and the writes lost (Write
// returned nil, never delivered).
//
// y3 keeps its QUIC reset secret in its state directory, and while it runs the address and
// connection ID of each client; restarted, it sends each old client its stateless reset
// before it serves, so every client (the sink too, which sends nothing until its
// keep-alive, 2.5 s after the crash) reconnects at once. YoMo's clients of YoMo's zipper
// wait out the 5 s idle timeout. y3's first delivery must come within 1 s of the new
// router listening, no later than YoMo's, losing no more writes.
func TestCrashRecovery(t *testing.T) {
	results := map[harness.Kind]crashResult{}
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		results[kind] = crashOnce(t, kind)
		res := results[kind]
		t.Logf("%s: restarted in %.0f ms; first delivery %.0f ms after the new router listened; lost %d of %d writes",
			kind, res.restart.Seconds()*1000, res.firstDelivery.Seconds()*1000, res.lost, res.written)
	})
	y3, okY3 := results[harness.Y3]
	yomo, okYoMo := results[harness.YoMo]
	if !okY3 {
		return
	}
	const bound = time.Second
	if y3.firstDelivery > bound {
		t.Errorf("y3: first delivery %v after restarting, want at most %v", y3.firstDelivery, bound)
	}
	if okYoMo {
		if y3.firstDelivery > yomo.firstDelivery {
			t.Errorf("first delivery: y3 %v, YoMo's zipper %v", y3.firstDelivery, yomo.firstDelivery)
		}
		if y3.lost > yomo.lost {
			t.Errorf("lost writes: y3 %d, YoMo's zipper %d", y3.lost, yomo.lost)
		}
	}
}

func crashOnce(t *testing.T, kind harness.Kind) crashResult {
	r := harness.Start(t, kind, harness.Options{})
	sinkCC := harness.Client(r, "crash-sink", "")
	sinkCC.Reconnect = true
	sk := harness.Sink(t, peer.FunctionConfig{ClientConfig: sinkCC, Observe: []uint32{tagIn}})
	srcCC := harness.Client(r, "crash-source", "")
	srcCC.Reconnect = true
	src := harness.Source(t, srcCC)

	// The writer: one stamped write every crashWriteEvery; seqs whose Write returned nil.
	var mu sync.Mutex
	var ok []uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(crashWriteEvery)
		defer tick.Stop()
		for seq := uint64(0); ; seq++ {
			if src.WriteStamped(tagIn, seq, 64, "") == nil {
				mu.Lock()
				ok = append(ok, seq)
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}()
	ctx := bounded(t, 10*time.Second)
	if err := sk.Tracker.WaitUnique(ctx, 25); err != nil {
		t.Fatalf("no traffic before the crash: %v", err)
	}

	killed, listening := r.(harness.Crasher).CrashRestart()
	// Frames from before the crash cannot arrive after the new router listens: the old
	// connections are gone with the old process. The first increase is a new delivery.
	base := sk.Tracker.Received()
	deadline := time.Now().Add(30 * time.Second)
	var first time.Time
	for time.Now().Before(deadline) {
		if sk.Tracker.Received() > base {
			first = time.Now()
			break
		}
		time.Sleep(time.Millisecond)
	}
	if first.IsZero() {
		t.Fatalf("%s: nothing delivered within 30 s of the restart (source: %v, sink: %v)",
			kind, src.LastError(), sk.LastError())
	}
	time.Sleep(crashTail)
	close(stop)
	<-done
	settle()
	time.Sleep(500 * time.Millisecond)

	mu.Lock()
	defer mu.Unlock()
	res := crashResult{firstDelivery: first.Sub(listening), restart: listening.Sub(killed), written: len(ok)}
	for _, seq := range ok {
		if sk.Tracker.SeqCount(seq) == 0 {
			res.lost++
		}
	}
	// The writes of the last moments all arrived: the path is whole again.
	for _, seq := range ok[len(ok)-10:] {
		if sk.Tracker.SeqCount(seq) == 0 {
			t.Errorf("%s: seq %d, written %v before the end, never arrived", kind, seq, crashTail)
			break
		}
	}
	return res
}
