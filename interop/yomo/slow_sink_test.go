package interop_test

import (
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/y3-dev/y3/interop/yomo/internal/harness"
)

// A sink that stops reading for a few seconds (its process stopped with SIGSTOP, as a
// stalled host or a stop-the-world pause does, then SIGCONT) while a source writes 2,000
// msg/s × 1 KiB for 8 s loses nothing: 16,000 of 16,000 on YoMo's zipper (which holds the
// source's Write back) and on `y3 serve` with its default queue settings (which buffers the
// ~6 MiB the pause leaves behind in the sink's 64 MiB queue). On the old defaults (1,024
// frames, evicted after 250 ms) y3 delivered 5,991.
func TestSlowSinkPausedLosesNothing(t *testing.T) {
	bin := buildPeer(t)
	const (
		rate  = 2000
		n     = 8 * rate
		size  = 1024
		pause = 3 * time.Second
	)
	forKinds(t, func(t *testing.T, kind harness.Kind) {
		r := harness.Start(t, kind, harness.Options{})
		common := []string{"--addr", r.Addr()}
		count := strconv.Itoa(n)
		sink := harness.StartProcess(t, nil, nil, bin, append([]string{"sink", "--name", "paused-sink",
			"--observe", "0x33", "--count", count, "--timeout-s", "45", "--reconnect"}, common...)...)
		readyLine(t, sink, `{"connected"`, nil)
		src := harness.StartProcess(t, nil, nil, bin, append([]string{"source", "--tag", "0x33",
			"--count", count, "--size", strconv.Itoa(size), "--rate", strconv.Itoa(rate), "--linger", "2s"}, common...)...)

		// Two seconds into the stream, the sink stops for three.
		time.Sleep(2 * time.Second)
		if err := sink.Signal(syscall.SIGSTOP); err != nil {
			t.Fatalf("SIGSTOP: %v", err)
		}
		time.Sleep(pause)
		if err := sink.Signal(syscall.SIGCONT); err != nil {
			t.Fatalf("SIGCONT: %v", err)
		}

		srcRep, code := finalReport(t, src, "source", 40*time.Second)
		if code != 0 || srcRep["sent"] != float64(n) || srcRep["errors"] != float64(0) {
			t.Errorf("source: exit %d, %v", code, srcRep)
		}
		sinkRep, code := finalReport(t, sink, "sink", 50*time.Second)
		t.Logf("%s: sink got %v of %d unique (missing %v, duplicates %v, latency max %v µs); the source took %vs to write %d",
			kind, sinkRep["unique"], n, sinkRep["missing"], sinkRep["duplicates"], sinkRep["max_us"], srcRep["seconds"], n)
		if code != 0 || sinkRep["unique"] != float64(n) || sinkRep["missing"] != float64(0) ||
			sinkRep["duplicates"] != float64(0) {
			t.Errorf("sink: exit %d, %v", code, sinkRep)
		}
	})
}
