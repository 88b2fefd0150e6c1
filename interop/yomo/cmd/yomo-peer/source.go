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

// runSource writes --count stamped messages with a real YoMo source and prints a
// peer.SourceReport. SIGTERM/SIGINT stop it early, with a report.
func runSource(args []string) int {
	fs := flag.NewFlagSet("source", flag.ContinueOnError)
	var run peer.SourceRun
	clientFlags(fs, &run.ClientConfig, "yomo-peer-source")
	tag := tagValue(0x33)
	fs.Var(&tag, "tag", "data tag, 0x33 or 51")
	fs.IntVar(&run.Count, "count", 1000, "messages to write")
	fs.IntVar(&run.Size, "size", 64, "payload bytes (at least 16: sequence number and send time)")
	fs.Float64Var(&run.Rate, "rate", 0, "messages per second (0: as fast as possible)")
	fs.StringVar(&run.Target, "target", "", "write with this target (WriteWithTarget)")
	fs.Uint64Var(&run.SeqStart, "seq-start", 0, "first sequence number")
	fs.DurationVar(&run.Linger, "linger", 300*time.Millisecond, "wait after the last write before closing")
	parse(fs, args)
	run.Tag = uint32(tag)
	if run.Count < 0 || run.Rate < 0 {
		usageError(fs, "--count and --rate must not be negative")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep := peer.RunSource(ctx, run)
	emit(rep)
	return status(rep.Error)
}
