package interop_test

import (
	"testing"
	"time"

	"github.com/y3-dev/y3/interop/yomo/internal/harness"
	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// notUTF8 is a target that is not UTF-8: Go strings are bytes, and YoMo's metadata
// (msgpack map[string]string) carries them as they are.
const notUTF8 = "t\xff\xfe"

// A YoMo source's WriteWithTarget with a target that is not UTF-8 is routed as YoMo's
// zipper routes it: the target is compared as bytes (so the frame reaches no function
// wanting "a", even one byte away), and the source keeps writing: its later frames,
// targeted and not, all arrive, each once (spec/frames.md, metadata). A function whose
// own wanted target is not UTF-8 is not part of this test: y3 refuses such a handshake
// (invalid_utf8) where YoMo's zipper admits it.
func TestWriteWithTargetNotUTF8(t *testing.T) {
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		const n = 20
		r := harness.Start(t, kind, harness.Options{})
		a, plain := wanting(t, r, "sfn-a", "a"), wanting(t, r, "sfn-plain", "")
		src := harness.Source(t, harness.Client(r, "source", ""))

		// 0.. to a target that is not UTF-8, 100.. to "a", 200.. to "a" and a byte that is
		// not UTF-8, 300.. untargeted: last, so once every function has those, the
		// earlier ones arrived (per producer and consumer, the wire order holds).
		writeBatch(t, src, tagIn, 0, n, 32, notUTF8)
		writeBatch(t, src, tagIn, 100, n, 32, "a")
		writeBatch(t, src, tagIn, 200, n, 32, "a\xff")
		writeBatch(t, src, tagIn, 300, n, 32, "")

		ctx := bounded(t, 15*time.Second)
		waitRange(t, ctx, a, 100, n)
		for _, sk := range []*peer.Sink{a, plain} {
			waitRange(t, ctx, sk, 300, n)
		}
		settle()

		exactBatches(t, n, map[string]batches{
			"sfn-a":     {a, []uint64{100, 300}},
			"sfn-plain": {plain, []uint64{300}},
		})
	})
}
