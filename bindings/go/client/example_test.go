package client_test

import (
	"bytes"
	"context"
	"fmt"
	"log"

	y3 "github.com/y3-dev/y3/bindings/go"
	"github.com/y3-dev/y3/bindings/go/client"
	"github.com/y3-dev/y3/bindings/go/client/quicdial"
)

// The README's pipeline: a stream function, a sink and a source (compiled, not run: it
// needs a router on 127.0.0.1:9000).
func Example() {
	ctx := context.Background()
	opts := client.Options{Name: "noise-alert", Token: "secret"}

	// A stream function: observe 0x10, read NoiseData.Noise (0x10/0x11) with the streaming
	// observer, emit an alert under 0x20 above 60 dB.
	obs, _ := y3.NewObserver(y3.DefaultConfig, y3.Path{0x10, 0x11})
	go client.RunStreamFunction(ctx, "127.0.0.1:9000", opts, []uint32{0x10},
		func(ctx context.Context, in client.Data) (uint32, []byte, bool, error) {
			obs.Reset()
			var noise float32
			err := obs.FeedAll(in.Payload, func(v *y3.Observed) (err error) { noise, err = v.Float32(); return })
			if err != nil || noise <= 60 {
				return 0, nil, false, nil // no output
			}
			alert, err := y3.NewNode(0x20, y3.Item{ID: 0x21, Value: y3.Float32(noise)}).Encode(y3.Golang)
			return 0x20, alert, err == nil, err // keeps the input's metadata (yomo-tid, ...), hops + 1
		})

	// A sink: frames on a channel (or sink.Recv(ctx)).
	sink, err := client.ConnectSink(ctx, "127.0.0.1:9000", client.Options{Token: "secret"}, []uint32{0x20})
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		for d := range sink.C() {
			fmt.Println(d.Metadata[client.MetaTID], d.Hops, d.Payload)
		}
		log.Println("sink stopped:", sink.Err())
	}()

	// A source.
	src, err := client.ConnectSource(ctx, "127.0.0.1:9000", client.Options{Name: "sensor-1", Token: "secret"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := src.SendMarshal(0x10, NoiseData{Noise: 72.5, From: "sensor-1"}); err != nil {
		log.Fatal(err)
	}
	if err := src.Close(); err != nil {
		log.Fatal(err)
	}
}

// A YoMo zipper (`yomo serve`, QUIC only): YoMo's credential, and no certificate check,
// as its self-signed certificate cannot be verified.
func Example_yomo() {
	opts := client.Options{Name: "sensor", Credential: "token:secret", Dialer: quicdial.Insecure()}
	src, err := client.ConnectSource(context.Background(), "127.0.0.1:9000", opts)
	if err != nil {
		log.Fatal(err) // a wrong token: client.KindRejected, with the zipper's message
	}
	defer src.Close()
	if _, err := src.SendWithTarget(0x33, []byte("hello"), "sfn-a"); err != nil {
		log.Fatal(err)
	}
}

// QUIC, trusting the development certificate `y3 serve` writes (it prints the path, by
// default $XDG_RUNTIME_DIR/y3/dev-cert.pem).
func Example_quic() {
	tlsConf, err := client.TLSConfigFromPEMFile("/run/user/1000/y3/dev-cert.pem")
	if err != nil {
		log.Fatal(err)
	}
	opts := client.Options{Name: "sensor", Dialer: quicdial.New(tlsConf)}
	src, err := client.ConnectSource(context.Background(), "127.0.0.1:9000", opts)
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
}

// A durable relay on `y3 serve` (compiled, not run): its outputs are kept until the router
// has stored them and written again after a reconnect. With 0x10 and 0x20 among the
// router's [federation] durable_tags, and the stable name, no output is lost when the
// router is killed mid-stream.
func ExampleRunDurableStreamFunction() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	opts := client.Options{Name: "relay", Token: "secret"}
	err := client.RunDurableStreamFunction(ctx, "127.0.0.1:9000", opts, []uint32{0x10},
		func(_ context.Context, in client.Data) (uint32, []byte, bool, error) {
			return 0x20, in.Payload, true, nil // same yomo-tid as the input: de-duplicated downstream
		})
	if err != nil {
		log.Fatal(err) // gave_up, a refusal
	}
}

// A splitter (compiled, not run): any number of outputs per input with Write (YoMo's
// ctx.Write in a loop), and one with WriteWithTarget for the function wanting "audit"
// only. Each write waits for room in the send queue; a write once the connection is gone
// fails (kind closed), and the function reconnects by itself.
func ExampleRunStreamFunctionWriter() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	opts := client.Options{Name: "splitter", Token: "secret"}
	err := client.RunStreamFunctionWriter(ctx, "127.0.0.1:9000", opts, []uint32{0x10},
		func(_ context.Context, in client.Data, w *client.Writer) error {
			for _, line := range bytes.Split(in.Payload, []byte("\n")) {
				if err := w.Write(0x20, line); err != nil {
					return nil // the connection is gone: skip the rest of this input
				}
			}
			_ = w.WriteWithTarget(0x21, in.Payload, "audit")
			return nil
		})
	if err != nil {
		log.Fatal(err) // gave_up, a refusal
	}
}
