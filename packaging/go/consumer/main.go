// Command consumer is a module outside this repository that uses y3's Go codec and client
// with no replace directive: scripts/test-packages.sh builds it against a module proxy made
// from the repository's own modules and runs it against `y3 serve`.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	y3 "github.com/y3-dev/y3/bindings/go"
	"github.com/y3-dev/y3/bindings/go/client"
)

func main() {
	buf, err := y3.Marshal(0x10, int64(42))
	if err != nil {
		fail(err)
	}
	var back int64
	if err := y3.Unmarshal(buf, 0x10, &back); err != nil || back != 42 {
		fail(fmt.Errorf("decoded %d: %v", back, err))
	}
	fmt.Printf("codec: %x\n", buf)
	if len(os.Args) < 2 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addr := os.Args[1]
	sink, err := client.ConnectSink(ctx, addr, client.Options{Name: "consumer-sink"}, []uint32{0x33})
	if err != nil {
		fail(err)
	}
	defer sink.Close()
	src, err := client.ConnectSource(ctx, addr, client.Options{Name: "consumer-source"})
	if err != nil {
		fail(err)
	}
	defer src.Close()
	for {
		if _, err := src.Send(0x33, buf); err != nil {
			fail(err)
		}
		rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		d, err := sink.Recv(rctx)
		rcancel()
		if err == nil {
			fmt.Printf("client: routed %x through %s\n", d.Payload, addr)
			return
		}
		if ctx.Err() != nil {
			fail(fmt.Errorf("nothing routed through %s", addr))
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "consumer:", err)
	os.Exit(1)
}
