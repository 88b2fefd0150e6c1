// Command yomo-app is a YoMo v1.22 application, unchanged, pointed at y3: a source, a
// stream function and a sink, all written with YoMo's own Go SDK, talking to `y3 serve`
// instead of `yomo serve`. Only the zipper address changes.
//
//	y3 serve &                          # QUIC on 127.0.0.1:9000
//	go run ./examples/yomo-app          # YOMO_ZIPPER=host:port to point elsewhere
//
// The source writes noise levels on tag 0x33; the stream function passes the loud ones
// (above 60) on tag 0x34; the sink counts them. It exits 0 once every loud reading
// arrived, 1 otherwise.
package main

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/yomorun/yomo"
	"github.com/yomorun/yomo/serverless"
)

const (
	readings = 0x33
	alerts   = 0x34
)

func main() {
	addr := os.Getenv("YOMO_ZIPPER")
	if addr == "" {
		addr = "localhost:9000"
	}
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	levels := []float64{35, 72.5, 41, 88, 60, 61.5}
	loud := 0
	for _, l := range levels {
		if l > 60 {
			loud++
		}
	}

	got := make(chan float64, len(levels))
	sink := yomo.NewStreamFunction("alerts", addr, yomo.WithSfnLogger(quiet))
	sink.SetObserveDataTags(alerts)
	check(sink.SetHandler(func(ctx serverless.Context) {
		if v, err := strconv.ParseFloat(string(ctx.Data()), 64); err == nil {
			got <- v
		}
	}))
	check(sink.Connect())
	defer sink.Close()

	fn := yomo.NewStreamFunction("loud", addr, yomo.WithSfnLogger(quiet))
	fn.SetObserveDataTags(readings)
	check(fn.SetHandler(func(ctx serverless.Context) {
		v, err := strconv.ParseFloat(string(ctx.Data()), 64)
		if err == nil && v > 60 {
			_ = ctx.Write(alerts, ctx.Data())
		}
	}))
	check(fn.Connect())
	defer fn.Close()

	source := yomo.NewSource("meter", addr, yomo.WithLogger(quiet))
	check(source.Connect())
	defer source.Close()
	time.Sleep(200 * time.Millisecond) // let the functions' subscriptions settle
	for _, l := range levels {
		check(source.Write(readings, []byte(strconv.FormatFloat(l, 'f', -1, 64))))
	}

	deadline := time.After(10 * time.Second)
	for i := 0; i < loud; i++ {
		select {
		case v := <-got:
			fmt.Printf("alert: noise %v\n", v)
		case <-deadline:
			fmt.Printf("only %d of %d alerts arrived\n", i, loud)
			os.Exit(1)
		}
	}
	fmt.Printf("%d of %d readings were loud, through %s\n", loud, len(levels), addr)
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "yomo-app:", err)
		os.Exit(1)
	}
}
