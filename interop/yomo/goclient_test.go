package interop_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/y3-dev/y3/bindings/go/client"
	"github.com/y3-dev/y3/bindings/go/client/quicdial"

	"github.com/y3-dev/y3/interop/yomo/internal/harness"
	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// y3's Go client (bindings/go/client) against YoMo's own software: a real zipper, real
// YoMo sources and stream functions. Every test runs for each router kind; the zipper's
// self-signed certificate cannot be verified, so the Go client skips verification, as
// YoMo's clients do.

// goOpts are the Go client's options for r: QUIC without certificate checks, the token as
// YoMo's credential, a short linger (a YoMo zipper never closes a connection, so Close
// waits out the whole linger), and a bounded handshake.
func goOpts(r harness.Router, name, token string) client.Options {
	o := client.Options{
		Name:             name,
		Dialer:           quicdial.Insecure(),
		HandshakeTimeout: 5 * time.Second,
		Backoff:          client.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond, Attempts: 5},
		Linger:           300 * time.Millisecond,
	}
	if token != "" {
		o.Credential = "token:" + token
	}
	return o
}

// goSource connects the Go client's source to r, closed at cleanup.
func goSource(t *testing.T, ctx context.Context, r harness.Router, name string) *client.Source {
	t.Helper()
	src, err := client.ConnectSource(ctx, r.Addr(), goOpts(r, name, ""))
	if err != nil {
		t.Fatalf("Go source to %s: %v", r.Addr(), err)
	}
	t.Cleanup(func() { _ = src.Close() })
	return src
}

// goSink connects the Go client's sink to r, closed at cleanup.
func goSink(t *testing.T, ctx context.Context, o client.Options, r harness.Router, tags ...uint32) *client.Sink {
	t.Helper()
	sk, err := client.ConnectSink(ctx, r.Addr(), o, tags)
	if err != nil {
		t.Fatalf("Go sink to %s: %v", r.Addr(), err)
	}
	t.Cleanup(func() { _ = sk.Close() })
	return sk
}

// recvExactly receives n frames from sk, then makes sure no other frame follows.
func recvExactly(t *testing.T, ctx context.Context, sk *client.Sink, n int) []client.Data {
	t.Helper()
	var got []client.Data
	for len(got) < n {
		d, err := sk.Recv(ctx)
		if err != nil {
			t.Fatalf("Go sink: %d of %d frames: %v", len(got), n, err)
		}
		got = append(got, d)
	}
	settle()
	qctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if d, err := sk.Recv(qctx); err == nil {
		t.Fatalf("Go sink: a frame more than %d: %#v", n, d)
	}
	return got
}

// Go source → router → YoMo stream function: exact counts; each frame carries the
// yomo-tid Send returned and yomo-source-id = the Go source's id; the handshake id is
// "<id>-0"; SendWithTarget reaches only the function wanting the target.
func TestGoClientSourceToYoMoSink(t *testing.T) {
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		const n, size = 2000, 64
		r := harness.Start(t, kind, harness.Options{})
		ctx := bounded(t, 20*time.Second)
		sk := sink(t, r, "yomo-sink", tagIn)
		wantsA := harness.Sink(t, peer.FunctionConfig{
			ClientConfig: harness.Client(r, "yomo-sink-a", ""), Observe: []uint32{tagIn}, WantedTarget: "a"})
		src := goSource(t, ctx, r, "go-source")

		tids := map[string]bool{}
		for i := range n {
			tid, err := src.Send(tagIn, peer.Stamp(uint64(i), time.Now(), size))
			if err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
			tids[tid] = true
		}
		// Targeted at "a" (seqs 10000..): only yomo-sink-a; then untargeted again as an
		// order barrier for both.
		for i := range 20 {
			if _, err := src.SendWithTarget(tagIn, peer.Stamp(10_000+uint64(i), time.Now(), size), "a"); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 20 {
			if _, err := src.Send(tagIn, peer.Stamp(20_000+uint64(i), time.Now(), size)); err != nil {
				t.Fatal(err)
			}
		}
		if err := src.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		waitRange(t, ctx, sk, 0, n)
		waitRange(t, ctx, sk, 20_000, 20)
		waitRange(t, ctx, wantsA, 10_000, 20)
		waitRange(t, ctx, wantsA, 20_000, 20)
		settle()

		rep := sk.Tracker.Report(0, n)
		if rep.Received != n+20 || rep.Duplicates != 0 || rep.Missing != 0 || rep.BadPayloads != 0 {
			t.Errorf("YoMo sink: want exactly %d+20 frames once each (none targeted at a), got %+v", n, rep)
		}
		if !rep.TidOK || rep.DistinctTids != n+20 || !rep.SourceIDOK || !slices.Equal(rep.SourceIDs, []string{src.ID()}) {
			t.Errorf("YoMo sink: metadata: %+v, want yomo-source-id %s and a fresh yomo-tid each", rep, src.ID())
		}
		if len(src.ID()) != 21 {
			t.Errorf("source id %q is not 21 characters", src.ID())
		}
		// An untargeted frame reaches every observer, a wanted target or not.
		if repA := wantsA.Tracker.Report(0, n); repA.Received != n+40 || repA.Duplicates != 0 || repA.Missing != 0 {
			t.Errorf("YoMo sink wanting a: %+v, want every frame, the 20 targeted at a included", repA)
		}
		if obs, ok := r.(harness.Observer); ok {
			if ids := obs.ClientIDs("go-source"); !slices.Equal(ids, []string{src.ID() + "-0"}) {
				t.Errorf("handshake ids %v, want [%s-0]", ids, src.ID())
			}
		}
	})
}

// YoMo source → router → Go sink: exact counts, YoMo's metadata intact (yomo-source-id = the
// source's id, a distinct 21-character yomo-tid per frame, nothing else), payloads intact.
func TestGoClientSinkFromYoMoSource(t *testing.T) {
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		const n, size = 2000, 100
		r := harness.Start(t, kind, harness.Options{})
		ctx := bounded(t, 20*time.Second)
		sk := goSink(t, ctx, goOpts(r, "go-sink", ""), r, tagIn)
		logger, sourceID := newIDCapture()
		cc := harness.Client(r, "yomo-source", "")
		cc.Logger = logger
		src := harness.Source(t, cc)

		writeBatch(t, src, tagIn, 0, n, size, "")
		got := recvExactly(t, ctx, sk, n)

		id := sourceID()
		if len(id) != 21 {
			t.Fatalf("captured source id %q", id)
		}
		seqs := map[uint64]bool{}
		tids := map[string]bool{}
		for _, d := range got {
			seq, _, ok := peer.Unstamp(d.Payload)
			if !ok || len(d.Payload) != size || d.Tag != tagIn || d.Hops != 0 || seqs[seq] {
				t.Fatalf("frame %#v", d)
			}
			seqs[seq] = true
			tid := d.Metadata[client.MetaTID]
			if len(tid) != 21 || tids[tid] ||
				!maps.Equal(d.Metadata, map[string]string{client.MetaSourceID: id, client.MetaTID: tid}) {
				t.Fatalf("metadata %v (source %s)", d.Metadata, id)
			}
			tids[tid] = true
			if back, err := client.DecodeMetadata(d.RawMetadata); err != nil || !maps.Equal(back, d.Metadata) {
				t.Fatalf("raw metadata %x: %v", d.RawMetadata, err)
			}
		}
		if len(seqs) != n {
			t.Fatalf("%d distinct seqs", len(seqs))
		}
	})
}

// YoMo source → Go stream function (0x33 → 0x34) → YoMo stream function: exact counts; the
// Go function keeps the source's metadata (yomo-tid, yomo-source-id), drops yomo-target,
// and a frame targeted at it (its wanted target) reaches it alone.
func TestGoClientRelayBetweenYoMoClients(t *testing.T) {
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		const n, size = 1000, 128
		r := harness.Start(t, kind, harness.Options{})
		ctx := bounded(t, 20*time.Second)
		sk := sink(t, r, "yomo-sink", tagOut)
		other := harness.Sink(t, peer.FunctionConfig{
			ClientConfig: harness.Client(r, "yomo-other", ""), Observe: []uint32{tagIn}, WantedTarget: "other"})

		o := goOpts(r, "go-relay", "")
		o.WantedTarget = "go"
		fn, err := client.ConnectStreamFunction(ctx, r.Addr(), o, []uint32{tagIn})
		if err != nil {
			t.Fatal(err)
		}
		fnCtx, stop := context.WithCancel(ctx)
		served := make(chan error, 1)
		var relayed, targeted int
		go func() {
			served <- fn.Serve(fnCtx, func(_ context.Context, in client.Data) (uint32, []byte, bool, error) {
				relayed++
				if in.Metadata[client.MetaTarget] == "go" {
					targeted++
				}
				return tagOut, in.Payload, true, nil
			})
		}()
		t.Cleanup(func() {
			stop()
			select {
			case err := <-served:
				if err != nil {
					t.Errorf("Go function: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Error("the Go function did not stop")
			}
		})

		logger, sourceID := newIDCapture()
		cc := harness.Client(r, "yomo-source", "")
		cc.Logger = logger
		src := harness.Source(t, cc)
		writeBatch(t, src, tagIn, 0, n, size, "")
		// Targeted at the Go function: only it gets them, and its outputs reach the YoMo
		// sink (which wants no target) only because it dropped yomo-target.
		writeBatch(t, src, tagIn, 5_000, 20, size, "go")
		waitRange(t, ctx, sk, 0, n)
		waitRange(t, ctx, sk, 5_000, 20)
		settle()

		rep := sk.Tracker.Report(0, n)
		if rep.Received != n+20 || rep.Duplicates != 0 || rep.Missing != 0 || rep.BadPayloads != 0 {
			t.Errorf("YoMo sink: want exactly %d+20 relayed frames once each, got %+v", n, rep)
		}
		if !rep.TidOK || rep.DistinctTids != n+20 || !slices.Equal(rep.SourceIDs, []string{sourceID()}) {
			t.Errorf("metadata not carried through the Go function: %+v (source %s)", rep, sourceID())
		}
		if rep.Tags[peer.FormatTag(tagOut)] != n+20 || len(rep.Tags) != 1 {
			t.Errorf("tags %v, want only %s", rep.Tags, peer.FormatTag(tagOut))
		}
		if got := other.Tracker.Report(0, n); got.Received != n || got.Missing != 0 {
			t.Errorf("the function wanting another target: %+v, want only the %d untargeted frames", got, n)
		}
		stop()
		if err := <-served; err != nil {
			t.Fatalf("Go function: %v", err)
		}
		served <- nil // for the cleanup
		if relayed != n+20 || targeted != 20 {
			t.Errorf("Go function: %d frames (%d targeted at it), want %d (20)", relayed, targeted, n+20)
		}
	})
}

// YoMo source → Go stream function writing 300 outputs per input with Writer.Write (YoMo's
// ctx.Write in a loop) and one with WriteWithTarget(…, "a") → YoMo stream functions: the
// YoMo sink gets each of the 3 × 300 outputs once, with its input's yomo-tid and the
// source's id; the targeted output reaches only the YoMo function wanting "a" (3), never
// the one wanting "b" (0). On y3 serve's defaults this needs the router to cap loops per
// cycle rather than deliveries per yomo-tid (limits.max_deliveries_per_message, 128 before).
func TestGoClientWriterFanOutAndTarget(t *testing.T) {
	const inputs, perInput = 3, 300
	const tagTargeted, tagProbe uint32 = 0x35, 0x36
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		r := harness.Start(t, kind, harness.Options{})
		ctx := bounded(t, 30*time.Second)
		sk := sink(t, r, "yomo-sink", tagOut)
		wants := func(target string) *peer.Sink {
			return harness.Sink(t, peer.FunctionConfig{ClientConfig: harness.Client(r, "yomo-"+target, ""),
				Observe: []uint32{tagTargeted}, WantedTarget: target})
		}
		wantsA, wantsB := wants("a"), wants("b")
		probes := goSink(t, ctx, goOpts(r, "go-probes", ""), r, tagProbe)

		fn, err := client.ConnectStreamFunction(ctx, r.Addr(), goOpts(r, "go-splitter", ""), []uint32{tagIn})
		if err != nil {
			t.Fatal(err)
		}
		fnCtx, stop := context.WithCancel(ctx)
		served := make(chan error, 1)
		go func() {
			served <- fn.ServeWriter(fnCtx, func(_ context.Context, in client.Data, w *client.Writer) error {
				seq, _, ok := peer.Unstamp(in.Payload)
				if !ok || seq >= probeSeq {
					return w.Write(tagProbe, in.Payload)
				}
				for i := range uint64(perInput) {
					if err := w.Write(tagOut, peer.Stamp(seq*perInput+i, time.Now(), 64)); err != nil {
						return err
					}
				}
				return w.WriteWithTarget(tagTargeted, in.Payload, "a")
			})
		}()
		t.Cleanup(func() {
			stop()
			select {
			case err := <-served:
				if err != nil {
					t.Errorf("Go function: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Error("the Go function did not stop")
			}
		})

		logger, sourceID := newIDCapture()
		cc := harness.Client(r, "yomo-source", "")
		cc.Logger = logger
		src := harness.Source(t, cc)
		// The Go function is subscribed once it answers a probe.
		for seq := probeSeq; ; seq++ {
			if err := src.WriteStamped(tagIn, seq, 32, ""); err != nil {
				t.Fatal(err)
			}
			pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			_, err := probes.Recv(pctx)
			cancel()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatal("the Go function got no probe")
			}
		}
		writeBatch(t, src, tagIn, 0, inputs, 64, "")
		waitRange(t, ctx, sk, 0, inputs*perInput)
		waitRange(t, ctx, wantsA, 0, inputs)
		settle()

		rep := sk.Tracker.Report(0, inputs*perInput)
		if rep.Received != inputs*perInput || rep.Duplicates != 0 || rep.Missing != 0 || rep.BadPayloads != 0 {
			t.Errorf("YoMo sink: want exactly %d outputs once each, got %+v", inputs*perInput, rep)
		}
		// Every output carries its input's yomo-tid: 3 distinct ones.
		if !rep.TidOK || rep.DistinctTids != inputs || !slices.Equal(rep.SourceIDs, []string{sourceID()}) {
			t.Errorf("metadata not carried through the Go function: %+v (source %s)", rep, sourceID())
		}
		if got := wantsA.Tracker.Report(0, inputs); got.Received != inputs || got.Missing != 0 || got.Duplicates != 0 {
			t.Errorf("the function wanting a: %+v, want exactly the %d targeted outputs", got, inputs)
		}
		if got := wantsB.Tracker.Report(0, inputs); got.Received != 0 {
			t.Errorf("the function wanting b: %+v, want nothing", got)
		}
	})
}

// A wrong (or missing) token: every Go client type gets the typed, non-retried error at
// once — rejected (YoMo's code-less rejection, with its message) from YoMo's zipper,
// unauthorized (y3 code 2) from y3 — and the router goes on serving the right token.
func TestGoClientWrongToken(t *testing.T) {
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		const token = "secret-token"
		r := harness.Start(t, kind, harness.Options{Token: token})
		ctx := bounded(t, 20*time.Second)
		want := client.KindRejected
		if kind == harness.Y3 {
			want = client.KindUnauthorized
		}
		check := func(what string, err error) {
			t.Helper()
			var e *client.Error
			if !errors.As(err, &e) || e.Kind != want || e.Retryable() || client.Retryable(err) {
				t.Errorf("%s: want a %s error, got %v", what, want, err)
				return
			}
			t.Logf("%s: %v", what, err)
		}
		start := time.Now()
		_, err := client.ConnectSource(ctx, r.Addr(), goOpts(r, "go-source", "wrong"))
		check("source, wrong token", err)
		_, err = client.ConnectSource(ctx, r.Addr(), goOpts(r, "go-source", ""))
		check("source, no token", err)
		_, err = client.ConnectSink(ctx, r.Addr(), goOpts(r, "go-sink", "wrong"), []uint32{tagIn})
		check("sink, wrong token", err)
		_, err = client.ConnectStreamFunction(ctx, r.Addr(), goOpts(r, "go-function", "wrong"), []uint32{tagIn})
		check("stream function, wrong token", err)
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Errorf("the refusals took %v: retried?", elapsed)
		}
		if obs, ok := r.(harness.Observer); ok {
			// Refused before the connection was admitted: no handshake was acknowledged.
			if ids := obs.ClientIDs("go-source"); len(ids) != 0 {
				t.Errorf("admitted %v", ids)
			}
		}

		// The right token: Go source → YoMo sink.
		sk := harness.Sink(t, peer.FunctionConfig{ClientConfig: harness.Client(r, "yomo-sink", token), Observe: []uint32{tagIn}})
		src, err := client.ConnectSource(ctx, r.Addr(), goOpts(r, "go-source", token))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = src.Close() })
		for i := range 50 {
			if _, err := src.Send(tagIn, peer.Stamp(uint64(i), time.Now(), 64)); err != nil {
				t.Fatal(err)
			}
		}
		waitRange(t, ctx, sk, 0, 50)
	})
}
