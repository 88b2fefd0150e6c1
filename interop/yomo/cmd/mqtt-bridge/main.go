// Command mqtt-bridge is the gateway a YoMo deployment runs today between an MQTT broker and
// YoMo's zipper (issue 31's baseline, measured by `y3-lab net mqtt`): an MQTT client
// (Eclipse paho) subscribed to --in-topic re-publishes every message into the zipper with a
// real YoMo v1.22.0 source under --in-tag, and a real YoMo stream function observing
// --out-tag publishes what reaches it to the broker under --out-topic.
//
//	sensor ─MQTT─▶ broker ─MQTT─▶ mqtt-bridge ─YoMo source─▶ zipper ─▶ stream function
//	subscriber ◀─MQTT─ broker ◀─MQTT─ mqtt-bridge ◀─YoMo sfn (--out-tag)─ zipper ◀─┘
//
//	mqtt-bridge --mqtt 127.0.0.1:1883 --zipper 127.0.0.1:9000 --in-topic lab/in --in-tag 0x10
//	            --out-tag 0x20 --out-topic lab/out [--qos 0|1]
//
// It prints {"connected":"<zipper>"} once both sides are up, and on SIGTERM/SIGINT a summary
// {"bridged_in":N,"bridged_out":N,"errors":N}. Exit status: 0 ok, 1 it could not connect,
// 2 bad usage.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/yomorun/yomo"
	"github.com/yomorun/yomo/core/ylog"
	"github.com/yomorun/yomo/serverless"

	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// report is the summary line.
type report struct {
	BridgedIn  int64  `json:"bridged_in"`
	BridgedOut int64  `json:"bridged_out"`
	Errors     int64  `json:"errors"`
	Error      string `json:"error,omitempty"`
}

func main() {
	stdout := os.Stdout
	// YoMo prints status lines on stdout; the JSON lines keep it.
	os.Stdout = os.Stderr
	ylog.SetDefault(peer.Logger())
	emit := func(v any) {
		line, _ := json.Marshal(v)
		fmt.Fprintf(stdout, "%s\n", line)
	}

	fs := flag.NewFlagSet("mqtt-bridge", flag.ContinueOnError)
	broker := fs.String("mqtt", "127.0.0.1:1883", "MQTT broker host:port")
	zipper := fs.String("zipper", "127.0.0.1:9000", "YoMo zipper host:port (QUIC)")
	inTopic := fs.String("in-topic", "lab/in", "MQTT topic filter to bridge into the zipper")
	outTopic := fs.String("out-topic", "lab/out", "MQTT topic the stream function's output goes to")
	qos := fs.Int("qos", 0, "MQTT QoS both ways (0 or 1)")
	var inTag, outTag uint32
	fs.Func("in-tag", "YoMo tag of bridged MQTT messages (default 0x10)", func(s string) (err error) {
		inTag, err = peer.ParseTag(s)
		return
	})
	fs.Func("out-tag", "YoMo tag bridged back to MQTT (default 0x20)", func(s string) (err error) {
		outTag, err = peer.ParseTag(s)
		return
	})
	inTag, outTag = 0x10, 0x20
	if err := fs.Parse(os.Args[1:]); err != nil || fs.NArg() > 0 || *qos < 0 || *qos > 1 {
		fs.PrintDefaults()
		os.Exit(2)
	}
	var rep report
	var in, out, errs atomic.Int64
	fail := func(err error) {
		rep.Error = err.Error()
		emit(rep)
		os.Exit(1)
	}

	source := yomo.NewSource("mqtt-bridge-source", *zipper)
	if err := source.Connect(); err != nil {
		fail(fmt.Errorf("source: %w", err))
	}

	opts := mqtt.NewClientOptions().
		AddBroker("tcp://" + *broker).
		SetClientID(fmt.Sprintf("mqtt-bridge-%d", os.Getpid())).
		SetCleanSession(true).
		SetOrderMatters(true).
		SetConnectTimeout(10 * time.Second)
	client := mqtt.NewClient(opts)
	if t := client.Connect(); !t.WaitTimeout(10*time.Second) || t.Error() != nil {
		fail(fmt.Errorf("mqtt connect: %v", t.Error()))
	}

	sfn := yomo.NewStreamFunction("mqtt-bridge-sink", *zipper)
	sfn.SetObserveDataTags(outTag)
	if err := sfn.SetHandler(func(ctx serverless.Context) {
		t := client.Publish(*outTopic, byte(*qos), false, ctx.Data())
		if *qos > 0 {
			t.Wait()
		}
		if t.Error() != nil {
			errs.Add(1)
			return
		}
		out.Add(1)
	}); err != nil {
		fail(err)
	}
	if err := sfn.Connect(); err != nil {
		fail(fmt.Errorf("stream function: %w", err))
	}

	t := client.Subscribe(*inTopic, byte(*qos), func(_ mqtt.Client, m mqtt.Message) {
		if err := source.Write(inTag, m.Payload()); err != nil {
			errs.Add(1)
			return
		}
		in.Add(1)
	})
	if !t.WaitTimeout(10*time.Second) || t.Error() != nil {
		fail(fmt.Errorf("mqtt subscribe: %v", t.Error()))
	}
	emit(map[string]string{"connected": *zipper})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	client.Disconnect(100)
	_ = sfn.Close()
	_ = source.Close()
	rep.BridgedIn, rep.BridgedOut, rep.Errors = in.Load(), out.Load(), errs.Load()
	emit(rep)
}
