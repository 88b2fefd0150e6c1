package client_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/y3-dev/y3/bindings/go/client"
)

// Tags of the fan-out tests: inputs, the fan-out, targeted outputs, and what the functions
// wanting targets a and b write on.
const (
	fanIn, fanOut, fanTargeted, fanA, fanB = 0x40, 0x41, 0x42, 0x47, 0x48
	fanInputs, fanPerInput                 = 3, 300
)

// num is a 4-byte big-endian number; probes are "probe".
func num(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

// runFanOut runs, through the router at addr: a function (durable or not) writing 300
// outputs per input on fanOut plus one WriteWithTarget to "a" on fanTargeted; two
// functions wanting targets a and b re-emitting what they get on fanA / fanB; a sink of
// all three. It sends 3 inputs and checks that the sink gets each of the 900 outputs once,
// every one with its input's yomo-tid and the source's id, 3 from the function wanting a,
// none from the one wanting b.
func runFanOut(t *testing.T, addr string, durable bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sink, err := client.ConnectSink(ctx, addr, opts("fan-sink"), []uint32{fanOut, fanA, fanB})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	fnCtx, stopFns := context.WithCancel(ctx)
	var fns sync.WaitGroup
	defer fns.Wait()
	defer stopFns()
	run := func(name string, f func() error) {
		fns.Add(1)
		go func() {
			defer fns.Done()
			if err := f(); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}()
	}
	for target, emit := range map[string]uint32{"a": fanA, "b": fanB} {
		o := opts("relay-" + target)
		o.WantedTarget = target
		run(o.Name, func() error {
			return client.RunStreamFunctionWriter(fnCtx, addr, o, []uint32{fanTargeted},
				func(_ context.Context, in client.Data, w *client.Writer) error {
					_ = w.Write(emit, in.Payload)
					return nil
				})
		})
	}
	splitter := func(_ context.Context, in client.Data, w *client.Writer) error {
		if string(in.Payload) == "probe" {
			_ = w.Write(fanOut, in.Payload)
			_ = w.WriteWithTarget(fanTargeted, in.Payload, "a")
			_ = w.WriteWithTarget(fanTargeted, in.Payload, "b")
			return nil
		}
		input := binary.BigEndian.Uint32(in.Payload)
		for i := range uint32(fanPerInput) {
			if err := w.Write(fanOut, num(input*1000+i)); err != nil {
				return err
			}
		}
		return w.WriteWithTarget(fanTargeted, in.Payload, "a")
	}
	run("splitter", func() error {
		if durable {
			return client.RunDurableStreamFunctionWriter(fnCtx, addr, opts("splitter"), []uint32{fanIn}, splitter)
		}
		return client.RunStreamFunctionWriter(fnCtx, addr, opts("splitter"), []uint32{fanIn}, splitter)
	})
	src, err := client.ConnectSource(ctx, addr, opts("fan-source"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()

	// Probe until all three functions answer (each is subscribed).
	probed := map[uint32]bool{}
	for len(probed) < 3 {
		if _, err := src.Send(fanIn, []byte("probe")); err != nil {
			t.Fatal(err)
		}
		for {
			rctx, rcancel := context.WithTimeout(ctx, 100*time.Millisecond)
			d, err := sink.Recv(rctx)
			rcancel()
			if err != nil {
				break
			}
			probed[d.Tag] = true
		}
		if ctx.Err() != nil {
			t.Fatalf("the functions never answered: %v", probed)
		}
	}

	tids := map[uint32]string{}
	for input := uint32(1); input <= fanInputs; input++ {
		tid, err := src.Send(fanIn, num(input))
		if err != nil {
			t.Fatal(err)
		}
		tids[input] = tid
	}
	got := map[uint32]map[uint32]bool{fanOut: {}, fanA: {}, fanB: {}}
	for n := 0; n < fanInputs*(fanPerInput+1); {
		d, err := sink.Recv(ctx)
		if err != nil {
			t.Fatalf("after %d outputs: %v", n, err)
		}
		if string(d.Payload) == "probe" {
			continue // a late answer to a probe
		}
		v := binary.BigEndian.Uint32(d.Payload)
		input := v
		if d.Tag == fanOut {
			input = v / 1000
		}
		if d.Metadata[client.MetaTID] != tids[input] || d.Metadata[client.MetaSourceID] != src.ID() ||
			d.Metadata[client.MetaTarget] != "" {
			t.Fatalf("%#x %d: metadata %v", d.Tag, v, d.Metadata)
		}
		if got[d.Tag][v] {
			t.Fatalf("%#x %d twice", d.Tag, v)
		}
		got[d.Tag][v] = true
		n++
	}
	qctx, qcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer qcancel()
	for {
		d, err := sink.Recv(qctx)
		if err != nil {
			break
		}
		if string(d.Payload) != "probe" {
			t.Fatalf("unexpected %#v", d)
		}
	}
	for input := uint32(1); input <= fanInputs; input++ {
		for i := range uint32(fanPerInput) {
			if !got[fanOut][input*1000+i] {
				t.Fatalf("output %d missing", input*1000+i)
			}
		}
		if !got[fanA][input] {
			t.Fatalf("target a: input %d missing", input)
		}
	}
	if len(got[fanOut]) != fanInputs*fanPerInput || len(got[fanA]) != fanInputs || len(got[fanB]) != 0 {
		t.Fatalf("got %d outputs, %d for target a, %d for target b",
			len(got[fanOut]), len(got[fanA]), len(got[fanB]))
	}
}

// A function writes 300 outputs per input with Writer.Write (YoMo's ctx.Write in a loop)
// and one with WriteWithTarget: every output arrives once; the targeted one reaches only
// the function wanting its target. On y3 serve's defaults this needs the router to cap
// loops per cycle rather than deliveries per yomo-tid (limits.max_deliveries_per_message,
// 128 before).
func TestRouterWriterFanOutAndTarget(t *testing.T) {
	r := startRouter(t, routerOpts{token: token})
	runFanOut(t, r.tcp, false)
}

// The same with a durable function: every output kept until stored, each delivered once.
func TestRouterDurableWriterFanOut(t *testing.T) {
	r := startRouter(t, routerOpts{token: token})
	runFanOut(t, r.tcp, true)
}

// A Writer kept past its handler works while the function serves; once ServeWriter
// returned, its writes fail with kind closed, plain and durable.
func TestRouterWriterAfterStopIsClosed(t *testing.T) {
	r := startRouter(t, routerOpts{token: token})
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprint("durable=", durable), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			connect := client.ConnectStreamFunction
			if durable {
				connect = client.ConnectDurableStreamFunction
			}
			fn, err := connect(ctx, r.tcp, opts("keeper"), []uint32{fanIn})
			if err != nil {
				t.Fatal(err)
			}
			kept := make(chan *client.Writer, 1)
			fnCtx, stop := context.WithCancel(ctx)
			served := make(chan error, 1)
			go func() {
				served <- fn.ServeWriter(fnCtx, func(_ context.Context, _ client.Data, w *client.Writer) error {
					select {
					case kept <- w:
					default:
					}
					return nil
				})
			}()
			src, err := client.ConnectSource(ctx, r.tcp, opts("source"))
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			var w *client.Writer
			for w == nil {
				if _, err := src.Send(fanIn, []byte("probe")); err != nil {
					t.Fatal(err)
				}
				select {
				case w = <-kept:
				case <-time.After(100 * time.Millisecond):
				case <-ctx.Done():
					t.Fatal("the function got no input")
				}
			}
			if err := w.Write(fanOut, []byte("live")); err != nil {
				t.Fatal(err)
			}
			stop()
			if err := <-served; err != nil {
				t.Fatal(err)
			}
			if err := w.Write(fanOut, []byte("late")); client.KindOf(err) != client.KindClosed {
				t.Fatalf("a write after stopping: %v", err)
			}
			if err := w.WriteWithTarget(fanOut, []byte("late"), "t"); client.KindOf(err) != client.KindClosed {
				t.Fatalf("a targeted write after stopping: %v", err)
			}
		})
	}
}
