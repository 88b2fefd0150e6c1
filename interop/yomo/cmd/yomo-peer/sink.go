package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// runSink counts frames with a real YoMo stream function that never writes, until --count
// distinct sequence numbers arrived, --timeout-s passed or SIGTERM/SIGINT, then prints a
// peer.SinkReport. A timeout is a failure (status 1).
func runSink(args []string) int {
	fs := flag.NewFlagSet("sink", flag.ContinueOnError)
	var cfg peer.FunctionConfig
	clientFlags(fs, &cfg.ClientConfig, "yomo-peer-sink")
	observe := tagList{}
	fs.Var(&observe, "observe", "tag to observe (repeatable)")
	fs.StringVar(&cfg.WantedTarget, "wanted-target", "", "accept frames written with this target")
	count := fs.Int("count", 0, "stop once this many distinct sequence numbers arrived (0: run until the timeout or SIGTERM)")
	timeout := fs.Float64("timeout-s", 30, "give up after this many seconds")
	seqStart := fs.Uint64("seq-start", 0, "first expected sequence number")
	idle := fs.Float64("idle-s", 0, `with --count: stop once no frame arrived for this long after the first, with error "idle" (0: off)`)
	parse(fs, args)
	if len(observe) == 0 {
		usageError(fs, "at least one --observe is required")
	}
	cfg.Observe = observe

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sink, err := peer.ConnectSink(cfg)
	if err != nil {
		emit(peer.SinkReport{Error: err.Error(), SourceIDs: []string{}, Tags: map[string]int{}})
		return 1
	}
	emit(connected{Connected: cfg.Addr})

	wait, cancel := context.WithTimeout(ctx, seconds(*timeout))
	defer cancel()
	var waitErr error
	switch {
	case *count > 0 && *idle > 0:
		waitErr = sink.Tracker.WaitUniqueOrIdle(wait, *count, seconds(*idle))
	case *count > 0:
		waitErr = sink.Tracker.WaitUnique(wait, *count)
	default:
		<-wait.Done()
	}
	_ = sink.Close()
	rep := sink.Tracker.Report(*seqStart, *count)
	switch {
	case errors.Is(waitErr, context.DeadlineExceeded):
		rep.Error = "timeout"
	case errors.Is(waitErr, peer.ErrIdle):
		rep.Error = "idle"
	}
	emit(rep)
	return status(rep.Error)
}
