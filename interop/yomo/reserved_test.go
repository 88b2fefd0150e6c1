package interop_test

import (
	"testing"
	"time"

	"github.com/y3-dev/y3/interop/yomo/internal/harness"
	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// reservedTag is in [0xF000, 0xFFFF], which `yomo serve` (and y3, always) refuses.
const reservedTag uint32 = 0xF001

// A YoMo source writing a reserved tag is closed for good (QUIC code 0x13: the client does
// not reconnect and its writes fail), the frame reaches nobody, and other clients go on.
func TestReservedTag(t *testing.T) {
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		r := harness.Start(t, kind, harness.Options{RejectReserved: true})
		sk := sink(t, r, "sink", reservedTag, tagIn)
		bad := harness.Source(t, harness.Client(r, "bad-source", ""))

		if err := bad.WriteStamped(reservedTag, 1, 32, ""); err != nil {
			t.Fatalf("the first write only queues the frame, want no error: %v", err)
		}
		closed := waitClosedForGood(t, bad, 8*time.Second)
		t.Logf("closed: %v", closed)

		good := harness.Source(t, harness.Client(r, "good-source", ""))
		writeBatch(t, good, tagIn, 2, 1, 32, "")
		waitRange(t, bounded(t, 10*time.Second), sk, 2, 1)
		settle()
		if got := sk.Tracker.TagCount(reservedTag); got != 0 {
			t.Errorf("the stream function observing %s got %d frames, want none", peer.FormatTag(reservedTag), got)
		}
	})
}

// waitClosedForGood keeps writing an unobserved tag until a write fails, and requires that
// YoMo saw a remote close that stops it for good (not a lost connection it would
// reconnect from). Each write is bounded: a reconnecting YoMo client blocks in Write.
func waitClosedForGood(t *testing.T, src *peer.Source, within time.Duration) error {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		failed := make(chan error, 1)
		go func() { failed <- src.WriteStamped(0x35, 0, 32, "") }()
		select {
		case err := <-failed:
			if err != nil {
				if remote := src.RemoteClose(); remote == nil {
					t.Fatalf("write failed (%v) but YoMo saw no remote close for good (last error %v)", err, src.LastError())
				}
				return err
			}
		case <-time.After(time.Until(deadline)):
			t.Fatalf("a write blocked: the client is reconnecting, so the router did not close it with 0x13 (last error %v)", src.LastError())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("writes kept succeeding for %s: the connection was not closed (last error %v)", within, src.LastError())
	return nil
}
