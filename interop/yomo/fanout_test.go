package interop_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yomorun/yomo"
	"github.com/yomorun/yomo/serverless"

	"github.com/y3-dev/y3/interop/yomo/internal/harness"
	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// writer is a YoMo stream function whose handler writes outputs of its own (ctx.Write):
// a splitter, a streamed answer. It counts the inputs it handled and ctx.Write's results.
type writer struct {
	sfn     yomo.StreamFunction
	inputs  atomic.Int64
	written atomic.Int64
	errors  atomic.Int64
}

// write is ctx.Write of a payload stamped with seq, counted.
func (w *writer) write(ctx serverless.Context, tag uint32, seq uint64) {
	if err := ctx.Write(tag, peer.Stamp(seq, time.Now(), 32)); err != nil {
		w.errors.Add(1)
		return
	}
	w.written.Add(1)
}

// connectWriter connects a YoMo stream function named name observing tags to r, calling
// handle (after counting the input) for every frame; it is closed at cleanup.
func connectWriter(t *testing.T, r harness.Router, name string, tags []uint32, handle func(w *writer, ctx serverless.Context)) *writer {
	t.Helper()
	w := &writer{}
	w.sfn = yomo.NewStreamFunction(name, r.Addr(), yomo.WithSfnLogger(peer.Logger()))
	w.sfn.SetObserveDataTags(tags...)
	if err := w.sfn.SetHandler(func(ctx serverless.Context) {
		w.inputs.Add(1)
		handle(w, ctx)
	}); err != nil {
		t.Fatal(err)
	}
	connected := make(chan error, 1)
	go func() { connected <- w.sfn.Connect() }()
	select {
	case err := <-connected:
		if err != nil {
			t.Fatalf("connect YoMo stream function %.40q… (%d tags, name of %d bytes): %v", name, len(tags), len(name), err)
		}
	case <-time.After(peer.DefaultConnectTimeout):
		t.Fatalf("connect YoMo stream function %.40q…: timed out", name)
	}
	t.Cleanup(func() {
		done := make(chan struct{})
		go func() { _ = w.sfn.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(peer.DefaultCloseTimeout):
		}
	})
	return w
}

// inputSeq is the sequence number a source stamped on the input ctx holds.
func inputSeq(t *testing.T, ctx serverless.Context) uint64 {
	seq, _, ok := peer.Unstamp(ctx.Data())
	if !ok {
		t.Errorf("input of %d bytes holds no stamp", len(ctx.Data()))
	}
	return seq
}

// A YoMo function writing 300, then 10,000 outputs per input (ctx.Write in a loop, as
// splitters and batch expanders do): every output reaches the sink exactly once, and every
// ctx.Write returns nil. y3's old per-message budget delivered 128 of each input's outputs
// while ctx.Write returned nil for all of them.
func TestFanOutPerInput(t *testing.T) {
	for _, c := range []struct{ inputs, fan int }{{10, 300}, {2, 10_000}} {
		t.Run(fmt.Sprint(c.fan), func(t *testing.T) {
			forKinds(t, func(t *testing.T, kind harness.Kind) {
				total := c.inputs * c.fan
				r := harness.Start(t, kind, harness.Options{})
				sk := sink(t, r, "sink", tagOut)
				splitter := connectWriter(t, r, "splitter", []uint32{tagIn}, func(w *writer, ctx serverless.Context) {
					in := inputSeq(t, ctx)
					for j := 0; j < c.fan; j++ {
						w.write(ctx, tagOut, in*uint64(c.fan)+uint64(j))
					}
				})
				src := harness.Source(t, harness.Client(r, "source", ""))

				writeBatch(t, src, tagIn, 0, c.inputs, 32, "")
				if err := sk.Tracker.WaitRange(bounded(t, 60*time.Second), 0, total); err != nil {
					t.Errorf("waiting for %d outputs: %v", total, err)
				}
				settle()

				rep := sk.Tracker.Report(0, total)
				t.Logf("%s: %d inputs × %d outputs: sink received %d (%d unique), ctx.Write ok %d, errors %d",
					kind, c.inputs, c.fan, rep.Received, rep.Unique, splitter.written.Load(), splitter.errors.Load())
				if rep.Received != total || rep.Unique != total || rep.Duplicates != 0 || rep.Missing != 0 {
					t.Errorf("want exactly %d outputs once each at the sink, got %+v", total, summary(rep))
				}
				if got := splitter.inputs.Load(); got != int64(c.inputs) {
					t.Errorf("splitter handled %d inputs, want %d", got, c.inputs)
				}
				if w, e := splitter.written.Load(), splitter.errors.Load(); w != int64(total) || e != 0 {
					t.Errorf("ctx.Write: %d ok, %d errors; want %d ok", w, e, total)
				}
				if !rep.TidOK || rep.DistinctTids != c.inputs {
					t.Errorf("want each input's yomo-tid on its outputs: tid_ok=%v distinct=%d", rep.TidOK, rep.DistinctTids)
				}
			})
		})
	}
}

// One request answered by a stream of 300 outputs spread over 15 s (a streamed reply, as an
// LLM function gives one): all 300 arrive. y3's old per-message budget stopped at 128.
func TestStreamedAnswer(t *testing.T) {
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		const parts = 300
		const spread = 15 * time.Second
		r := harness.Start(t, kind, harness.Options{})
		sk := sink(t, r, "sink", tagOut)
		answerer := connectWriter(t, r, "answerer", []uint32{tagIn}, func(w *writer, ctx serverless.Context) {
			for j := 0; j < parts; j++ {
				w.write(ctx, tagOut, uint64(j))
				time.Sleep(spread / parts)
			}
		})
		src := harness.Source(t, harness.Client(r, "source", ""))

		started := time.Now()
		writeBatch(t, src, tagIn, 0, 1, 32, "")
		if err := sk.Tracker.WaitRange(bounded(t, spread+30*time.Second), 0, parts); err != nil {
			t.Errorf("waiting for the %d parts: %v", parts, err)
		}
		settle()

		rep := sk.Tracker.Report(0, parts)
		t.Logf("%s: %d of %d parts in %s; ctx.Write ok %d, errors %d", kind, rep.Unique, parts,
			time.Since(started).Round(time.Millisecond), answerer.written.Load(), answerer.errors.Load())
		if rep.Received != parts || rep.Unique != parts || rep.Duplicates != 0 {
			t.Errorf("want the %d parts once each, got %+v", parts, summary(rep))
		}
		if took := time.Since(started); took < spread*9/10 {
			t.Errorf("the answer took %s, less than its %s spread: not the streamed case", took, spread)
		}
	})
}

// A YoMo function observing 200 tags receives on every one of them: YoMo's zipper sets no
// limit; y3's old default (64 tags) refused it at connect.
func TestManyObservedTags(t *testing.T) {
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		const ntags = 200
		r := harness.Start(t, kind, harness.Options{})
		tags := make([]uint32, ntags)
		for i := range tags {
			tags[i] = 0x1000 + uint32(i)
		}
		perTag := make([]atomic.Int64, ntags)
		wide := connectWriter(t, r, "wide", tags, func(_ *writer, ctx serverless.Context) {
			if i := int(ctx.Tag()) - 0x1000; i >= 0 && i < ntags {
				perTag[i].Add(1)
			}
		})
		src := harness.Source(t, harness.Client(r, "source", ""))

		for i, tag := range tags {
			if err := src.WriteStamped(tag, uint64(i), 32, ""); err != nil {
				t.Fatalf("write to tag %#x: %v", tag, err)
			}
		}
		waitInputs(wide, ntags)
		settle()

		notOnce := 0
		for i := range perTag {
			if perTag[i].Load() != 1 {
				notOnce++
			}
		}
		t.Logf("%s: the %d-tag function received %d frames (%d tags not exactly once)", kind, ntags, wide.inputs.Load(), notOnce)
		if wide.inputs.Load() != ntags || notOnce != 0 {
			t.Errorf("the function observing %d tags received %d frames, %d tags not exactly once", ntags, wide.inputs.Load(), notOnce)
		}
	})
}

// A YoMo function with a 300-byte name is admitted and served: YoMo's zipper sets no limit;
// y3's old default (128 bytes) refused it at connect.
func TestLongName(t *testing.T) {
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		const n = 10
		r := harness.Start(t, kind, harness.Options{})
		long := strings.Repeat("n", 300)
		named := connectWriter(t, r, long, []uint32{tagIn}, func(_ *writer, _ serverless.Context) {})
		src := harness.Source(t, harness.Client(r, "source", ""))

		writeBatch(t, src, tagIn, 0, n, 32, "")
		waitInputs(named, n)
		settle()

		t.Logf("%s: the function with a %d-byte name received %d of %d", kind, len(long), named.inputs.Load(), n)
		if got := named.inputs.Load(); got != n {
			t.Errorf("the function with a %d-byte name received %d of %d", len(long), got, n)
		}
	})
}

// waitInputs waits up to 15 s for w to have handled n inputs.
func waitInputs(w *writer, n int64) {
	deadline := time.Now().Add(15 * time.Second)
	for w.inputs.Load() < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// summary is the counting part of a sink report.
func summary(r peer.SinkReport) string {
	return fmt.Sprintf("received=%d unique=%d missing=%d duplicates=%d bad=%d",
		r.Received, r.Unique, r.Missing, r.Duplicates, r.BadPayloads)
}

// A YoMo function writing the tag it observes (a self-loop by YoMo's rules; v1.22's
// handshake declares no output tags, so the router learns it at the first such output).
// YoMo's zipper hands each output back for ever; y3 on its defaults lets each message come
// back limits.max_loop_returns (8) times, so the function handles exactly 9 frames per
// message and its sink gets 1 + 9, and the loop is over.
func TestSelfLoop(t *testing.T) {
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		const n, perMessage = 10, 1 + 8
		const tag uint32 = 0x35
		r := harness.Start(t, kind, harness.Options{})
		sk := sink(t, r, "sink", tag)
		loop := connectWriter(t, r, "self-loop", []uint32{tag}, func(w *writer, ctx serverless.Context) {
			w.write(ctx, tag, inputSeq(t, ctx))
		})
		src := harness.Source(t, harness.Client(r, "source", ""))

		writeBatch(t, src, tag, 0, n, 32, "")
		time.Sleep(2 * time.Second)
		first := loop.inputs.Load()
		time.Sleep(time.Second)
		later := loop.inputs.Load()
		t.Logf("%s: %d messages: the self-loop handled %d frames after 2 s, %d after 3 s; its sink %d",
			kind, n, first, later, sk.Tracker.Received())
		switch kind {
		case harness.YoMo:
			// The control: YoMo's zipper has no loop bound (what y3 deliberately differs in).
			if later <= first || first <= n*perMessage {
				t.Errorf("YoMo's zipper: expected a loop that goes on, got %d then %d", first, later)
			}
		default:
			if first != n*perMessage || later != first {
				t.Errorf("want exactly %d frames at the self-loop (1 + 8 returns per message), got %d then %d", n*perMessage, first, later)
			}
			if got := sk.Tracker.Received(); got != n*(1+perMessage) {
				t.Errorf("sink: want %d (each message and its 9 echoes), got %d", n*(1+perMessage), got)
			}
		}
	})
}
