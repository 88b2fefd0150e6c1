package interop_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/yomorun/yomo/core"

	"github.com/y3-dev/y3/interop/yomo/internal/harness"
	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// Wrong tokens never lock out a right one (issue 25): 25 YoMo sources with a wrong token
// connect from 127.0.0.1, each gets YoMo's ErrRejected (and gives up for good, as YoMo's
// clients do), and then a YoMo source and stream function with the right token, from the
// same address, connect at once and deliver every frame. On the router defaults: YoMo's
// zipper has no throttle at all; y3 slows the wrong tokens down (its tarpit) instead of
// refusing the address.
func TestWrongTokensDoNotLockOutTheRightOne(t *testing.T) {
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		const (
			token  = "right-token"
			wrong  = 25
			lanes  = 5 // wrong clients connecting at once (y3 holds up to 16 refusals)
			frames = 500
		)
		r := harness.Start(t, kind, harness.Options{Token: token})

		var (
			mu       sync.Mutex
			rejected int
			others   []error
			wg       sync.WaitGroup
		)
		start := time.Now()
		for lane := 0; lane < lanes; lane++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := lane; i < wrong; i += lanes {
					cc := harness.Client(r, fmt.Sprintf("guess-%d", i), fmt.Sprintf("guess-%d", i))
					cc.ConnectTimeout = 20 * time.Second
					_, err := peer.ConnectSource(cc)
					var rej *core.ErrRejected
					mu.Lock()
					if errors.As(err, &rej) {
						rejected++
					} else {
						others = append(others, fmt.Errorf("guess-%d: %v", i, err))
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if rejected != wrong || len(others) > 0 {
			t.Errorf("%d of %d wrong tokens got ErrRejected; others: %v", rejected, wrong, others)
		}
		t.Logf("%d wrong-token connects answered in %v", wrong, time.Since(start).Round(time.Millisecond))

		// The right token from the same address: in at once, and served.
		began := time.Now()
		sk := harness.Sink(t, peer.FunctionConfig{ClientConfig: harness.Client(r, "sfn", token), Observe: []uint32{tagIn}})
		src := harness.Source(t, harness.Client(r, "source", token))
		took := time.Since(began)
		if took > 2*time.Second {
			t.Errorf("the right token took %v to connect", took)
		}
		writeBatch(t, src, tagIn, 0, frames, 64, "")
		waitRange(t, bounded(t, 15*time.Second), sk, 0, frames)
		settle()
		if got := sk.Tracker.Received(); got != frames {
			t.Errorf("stream function received %d frames, want exactly %d", got, frames)
		}
		if y3, ok := r.(interface{ Metric(string) (int, error) }); ok {
			n, err := y3.Metric(`y3_router_rejected_total{reason="unauthorized"}`)
			if err != nil || n != wrong {
				t.Errorf("y3 counted %d unauthorized (%v), want %d", n, err, wrong)
			}
			tarpitted, _ := y3.Metric("y3_router_tarpitted_total")
			t.Logf("y3: %d of the %d refusals delayed by the tarpit", tarpitted, wrong)
			if tarpitted == 0 {
				t.Errorf("no refusal was delayed: the tarpit did not slow the guesses down")
			}
		}
	})
}
