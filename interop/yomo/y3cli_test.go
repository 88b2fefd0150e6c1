package interop_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/y3-dev/y3/interop/yomo/internal/harness"
	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// y3's own clients, the `y3 observe` and `y3 send` commands, in one pipeline with YoMo's
// clients through YoMo's zipper, both ways. Needs $Y3_BIN.
func TestY3CLIWithYoMoZipper(t *testing.T) {
	bin := harness.Y3Bin(t)
	const n = 200
	quic := func(r harness.Router) []string {
		return []string{"--addr", r.Addr(), "--transport", "quic", "--insecure", "--tag", "0x33"}
	}

	t.Run("yomo-source-to-y3-observe", func(t *testing.T) {
		r := harness.Start(t, harness.YoMo, harness.Options{})
		const name = "y3-observe-itest"
		args := append([]string{"observe"}, quic(r)...)
		obs := harness.StartProcess(t, nil, nil, bin, append(args, "--count", strconv.Itoa(n), "--name", name)...)
		ctx := bounded(t, 20*time.Second)
		if err := r.(harness.Observer).WaitConnected(ctx, name); err != nil {
			t.Fatalf("y3 observe never completed a handshake with the YoMo zipper as %q: %v", name, err)
		}
		src := harness.Source(t, harness.Client(r, "yomo-source", ""))
		writeBatch(t, src, tagIn, 0, n, 48, "")

		seen := map[uint64]int{}
		for len(seen) < n {
			select {
			case line, ok := <-obs.Lines():
				if !ok {
					t.Fatalf("y3 observe ended after %d distinct frames, want %d", len(seen), n)
				}
				tag, payload, err := observedFrame(line)
				if err != nil {
					t.Fatalf("y3 observe line %q: %v", line, err)
				}
				seq, _, stamped := peer.Unstamp(payload)
				if tag != tagIn || !stamped || len(payload) != 48 {
					t.Fatalf("y3 observe line %q: tag %#x, %d-byte payload; want %#x, 48 bytes", line, tag, len(payload), tagIn)
				}
				seen[seq]++
			case <-ctx.Done():
				t.Fatalf("y3 observe printed %d of %d frames", len(seen), n)
			}
		}
		for seq := uint64(0); seq < n; seq++ {
			if seen[seq] != 1 {
				t.Errorf("seq %d seen %d times", seq, seen[seq])
			}
		}
		if err := obs.Wait(5 * time.Second); err != nil {
			t.Errorf("y3 observe --count %d: %v", n, err)
		}
	})

	t.Run("y3-send-to-yomo-sink", func(t *testing.T) {
		r := harness.Start(t, harness.YoMo, harness.Options{})
		sk := sink(t, r, "yomo-sink", tagIn)
		var lines strings.Builder
		for seq := uint64(0); seq < n; seq++ {
			fmt.Fprintf(&lines, "{\"payload_hex\":%q}\n", hex.EncodeToString(peer.Stamp(seq, time.Now(), 48)))
		}
		args := append([]string{"send"}, quic(r)...)
		send := harness.StartProcess(t, strings.NewReader(lines.String()), nil, bin, append(args, "--name", "y3-send-itest")...)
		if err := send.Wait(15 * time.Second); err != nil {
			t.Fatalf("y3 send: %v\nstderr:\n%s", err, send.Stderr())
		}
		waitRange(t, bounded(t, 10*time.Second), sk, 0, n)
		settle()
		rep := sk.Tracker.Report(0, n)
		if rep.Received != n || rep.Duplicates != 0 {
			t.Errorf("YoMo sink: want %d frames once each, got %+v", n, rep)
		}
		// y3 send is a source like YoMo's: a yomo-tid per message, its yomo-source-id.
		if !rep.TidOK || rep.DistinctTids != n || !rep.SourceIDOK || len(rep.SourceIDs) != 1 {
			t.Errorf("YoMo sink: want a distinct yomo-tid per frame and one yomo-source-id, got %+v", rep)
		}
	})
}

// observedFrame reads the tag and payload of a `y3 observe` line:
// {"tag":51,...,"payload_hex":"..."}.
func observedFrame(line string) (uint32, []byte, error) {
	var f struct {
		Tag        *uint32 `json:"tag"`
		PayloadHex *string `json:"payload_hex"`
	}
	if err := json.Unmarshal([]byte(line), &f); err != nil {
		return 0, nil, err
	}
	if f.Tag == nil || f.PayloadHex == nil {
		return 0, nil, fmt.Errorf("no tag or payload_hex")
	}
	payload, err := hex.DecodeString(*f.PayloadHex)
	return *f.Tag, payload, err
}
