package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// connected is the line sfn and sink print once the zipper routes to them.
type connected struct {
	Connected string `json:"connected"`
}

// runSFN relays every observed frame under --emit with a real YoMo stream function until
// SIGTERM/SIGINT or --exit-after frames, then prints a peer.RelayReport.
func runSFN(args []string) int {
	fs := flag.NewFlagSet("sfn", flag.ContinueOnError)
	var cfg peer.RelayConfig
	clientFlags(fs, &cfg.ClientConfig, "yomo-peer-sfn")
	observe := tagList{}
	fs.Var(&observe, "observe", "tag to observe (repeatable)")
	emitTag := tagValue(0x34)
	fs.Var(&emitTag, "emit", "tag of the re-emitted frames")
	fs.StringVar(&cfg.WantedTarget, "wanted-target", "", "accept frames written with this target")
	exitAfter := fs.Int64("exit-after", 0, "exit after relaying this many frames (0: run until SIGTERM)")
	linger := fs.Duration("linger", 300*time.Millisecond, "wait after the last relayed frame before closing")
	parse(fs, args)
	if len(observe) == 0 {
		usageError(fs, "at least one --observe is required")
	}
	cfg.Observe, cfg.Emit = observe, uint32(emitTag)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	relay, err := peer.ConnectRelay(cfg)
	if err != nil {
		emit(peer.RelayReport{Error: err.Error()})
		return 1
	}
	emit(connected{Connected: cfg.Addr})
	waitRelayed(ctx, relay, *exitAfter)
	if *exitAfter > 0 && ctx.Err() == nil {
		time.Sleep(*linger)
	}
	_ = relay.Close()
	emit(relay.Report())
	return 0
}

// waitRelayed returns when ctx ends or, with n > 0, once n frames have been handled.
func waitRelayed(ctx context.Context, relay *peer.Relay, n int64) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if r := relay.Report(); n > 0 && r.Relayed+r.Errors >= n {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
