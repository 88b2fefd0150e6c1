package interop_test

import (
	"errors"
	"testing"
	"time"

	"github.com/yomorun/yomo/core"

	"github.com/y3-dev/y3/interop/yomo/internal/harness"
	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// A router with a token rejects YoMo clients with a wrong or no token — the client's Connect
// returns YoMo's ErrRejected, also with reconnect on (YoMo never retries a rejection) — and
// goes on serving clients with the right token.
func TestWrongToken(t *testing.T) {
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		const token = "secret-token"
		r := harness.Start(t, kind, harness.Options{Token: token})

		rejected := func(what string, err error) {
			t.Helper()
			var rej *core.ErrRejected
			if !errors.As(err, &rej) {
				t.Errorf("%s: want YoMo's ErrRejected, got %v", what, err)
				return
			}
			t.Logf("%s: rejected: %q", what, rej.Message)
		}
		wrong := harness.Client(r, "bad-source", "wrong")
		wrong.ConnectTimeout = 8 * time.Second
		_, err := peer.ConnectSource(wrong)
		rejected("source with a wrong token", err)

		none := harness.Client(r, "anonymous-source", "")
		none.ConnectTimeout = 8 * time.Second
		_, err = peer.ConnectSource(none)
		rejected("source without a token", err)

		retrying := wrong
		retrying.Reconnect = true
		_, err = peer.ConnectSource(retrying)
		rejected("source with a wrong token and reconnect", err)

		_, err = peer.ConnectSink(peer.FunctionConfig{ClientConfig: wrong, Observe: []uint32{tagIn}})
		rejected("stream function with a wrong token", err)

		// The router still serves the right token.
		sk := harness.Sink(t, peer.FunctionConfig{ClientConfig: harness.Client(r, "sink", token), Observe: []uint32{tagIn}})
		src := harness.Source(t, harness.Client(r, "source", token))
		writeBatch(t, src, tagIn, 0, 50, 64, "")
		waitRange(t, bounded(t, 10*time.Second), sk, 0, 50)
	})
}
