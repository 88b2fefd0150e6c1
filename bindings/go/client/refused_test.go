package client_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/y3-dev/y3/bindings/go/client"
)

// Refused frames against `y3 serve` (spec/frames.md "Stored acknowledgements"): a frame the
// router drops by its rules is reported to a durable client as refused, with its reason,
// never as stored; it is not sent again, and everything else is delivered once.

func numberedData(tag uint32, i int, payload []byte, hops uint32) client.Data {
	md := client.EncodeMetadata(map[string]string{client.MetaTID: fmt.Sprintf("tid-%d", i)})
	return client.Data{Tag: tag, RawMetadata: md, Payload: payload, Hops: hops}
}

// Frames 3 and 4 are over the router's max_frame_len (1 KiB) and frame 6 is past its
// max_hops: the durable source learns exactly those as refused (too_long, too_long,
// hop_limit), the sink gets the seven others once each, nothing is resent, and Close
// reports the refusals (kind refused).
func TestRouterDurableSourceLearnsRefusedFrames(t *testing.T) {
	r := startRouter(t, routerOpts{token: token, config: "[limits]\nmax_frame_len = 1024\nmax_hops = 2\n"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sink, err := client.ConnectSink(ctx, r.tcp, opts("refused-sink"), []uint32{0x10})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	src, err := client.ConnectDurableSource(ctx, r.tcp, opts("refused-source"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		payload, hops := make([]byte, 100), uint32(0)
		if i == 3 || i == 4 {
			payload = make([]byte, 4096)
		}
		if i == 6 {
			hops = 5
		}
		if err := src.SendData(ctx, numberedData(0x10, i, payload, hops)); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.WaitStored(ctx); err != nil {
		t.Fatal(err)
	}
	var tids []string
	for _, d := range recvN(t, ctx, sink, 7, 300*time.Millisecond) {
		md, err := client.DecodeMetadata(d.RawMetadata)
		if err != nil {
			t.Fatal(err)
		}
		tids = append(tids, md[client.MetaTID])
	}
	if want := []string{"tid-0", "tid-1", "tid-2", "tid-5", "tid-7", "tid-8", "tid-9"}; !reflect.DeepEqual(tids, want) {
		t.Fatalf("delivered %v, want %v", tids, want)
	}
	want := []client.Refused{
		{Tag: 0x10, TID: "tid-3", Reason: client.RefusedTooLong},
		{Tag: 0x10, TID: "tid-4", Reason: client.RefusedTooLong},
		{Tag: 0x10, TID: "tid-6", Reason: client.RefusedHopLimit},
	}
	if got := src.Refusals(); !reflect.DeepEqual(got, want) {
		t.Fatalf("refusals %+v, want %+v", got, want)
	}
	if src.Refused() != 3 || src.Resent() != 0 || src.Unacked() != 0 {
		t.Fatalf("refused %d resent %d unacked %d", src.Refused(), src.Resent(), src.Unacked())
	}
	err = src.Close(ctx)
	var e *client.Error
	if !errors.As(err, &e) || e.Kind != client.KindRefused || e.Frames != 3 {
		t.Fatalf("close: %v", err)
	}

	// Nothing refused: Close succeeds.
	clean, err := client.ConnectDurableSource(ctx, r.tcp, opts("clean-source"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clean.Send(0x10, []byte("fine")); err != nil {
		t.Fatal(err)
	}
	if err := clean.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// A durable function observing the tag it writes, with max_loop_returns = 1: the message
// comes back once; the next output would reach no one but the function again, so it is
// refused as loop, and the function records it and does not write it again.
func TestRouterDurableFunctionLearnsLoopRefused(t *testing.T) {
	r := startRouter(t, routerOpts{token: token, config: "[limits]\nmax_loop_returns = 1\nmax_hops = 100\n"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fn, err := client.ConnectDurableStreamFunction(ctx, r.tcp, opts("looper"), []uint32{0x20})
	if err != nil {
		t.Fatal(err)
	}
	var inputs atomic.Int64
	served := make(chan error, 1)
	go func() {
		served <- fn.Serve(ctx, func(_ context.Context, in client.Data) (uint32, []byte, bool, error) {
			inputs.Add(1)
			return 0x20, in.Payload, true, nil
		})
	}()
	src, err := client.ConnectSource(ctx, r.tcp, opts("loop-source"))
	if err != nil {
		t.Fatal(err)
	}
	if err := src.SendData(ctx, numberedData(0x20, 0, []byte("round"), 0)); err != nil {
		t.Fatal(err)
	}
	for fn.Refused() == 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("no refusal; %d inputs", inputs.Load())
		case <-time.After(10 * time.Millisecond):
		}
	}
	time.Sleep(300 * time.Millisecond)
	want := []client.Refused{{Tag: 0x20, TID: "tid-0", Reason: client.RefusedLoop}}
	if got := fn.Refusals(); !reflect.DeepEqual(got, want) || fn.Refused() != 1 {
		t.Fatalf("refusals %+v, want %+v", got, want)
	}
	if n := inputs.Load(); n != 2 {
		t.Fatalf("%d inputs, want 2 (the message and its one allowed return)", n)
	}
	_ = src.Close()
	cancel()
	<-served
}

// "Stored" means stored: 30 frames to a tag nobody subscribes to are answered no_subscriber
// (not stored, not refused for good); the durable source keeps them and writes them again
// with backoff, and once a sink subscribes every one reaches it and Close returns nil.
func TestRouterDurableSourceKeepsFramesNobodyTook(t *testing.T) {
	r := startRouter(t, routerOpts{token: token})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	src, err := client.ConnectDurableSource(ctx, r.tcp, opts("early-source"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if err := src.SendData(ctx, numberedData(0x13, i, []byte("kept"), 0)); err != nil {
			t.Fatal(err)
		}
	}
	short, stop := context.WithTimeout(ctx, 400*time.Millisecond)
	err = src.WaitStored(short)
	stop()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stored with no subscriber: %v", err)
	}
	if src.Unacked() != 30 || src.Refused() != 0 || src.Retried() < 30 {
		t.Fatalf("unacked %d refused %d retried %d", src.Unacked(), src.Refused(), src.Retried())
	}
	sink, err := client.ConnectSink(ctx, r.tcp, opts("late-sink"), []uint32{0x13})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	if err := src.WaitStored(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < 30 {
		d, err := sink.Recv(ctx)
		if err != nil {
			t.Fatalf("received %d of 30: %v", len(seen), err)
		}
		md, _ := client.DecodeMetadata(d.RawMetadata)
		seen[md[client.MetaTID]] = true
	}
	if err := src.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
