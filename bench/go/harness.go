package main

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// settings mirror the Rust lab's: one sample is one timed batch of about `sample`.
type settings struct {
	warmup  time.Duration
	sample  time.Duration
	samples int
	threads int
}

// record is one result row, the same shape as the Rust lab's `Record`.
type record struct {
	Suite       string   `json:"suite"`
	Case        string   `json:"case"`
	Order       string   `json:"order"`
	Position    string   `json:"position"`
	KeyPos      int      `json:"key_pos"`
	Impl        string   `json:"impl"`
	Lang        string   `json:"lang"`
	Format      string   `json:"format"`
	Op          string   `json:"op"`
	Mode        string   `json:"mode"`
	Threads     int      `json:"threads"`
	NsPerOp     float64  `json:"ns_per_op"`
	CPUNsPerOp  float64  `json:"cpu_ns_per_op"`
	OpsPerS     float64  `json:"ops_per_s"`
	AllocsPerOp *float64 `json:"allocs_per_op,omitempty"`
	Bytes       int      `json:"bytes"`
	Samples     int      `json:"samples"`
	Batch       uint64   `json:"batch"`
}

// cpuNow is the process CPU clock (all threads), as the Rust lab reads it.
func cpuNow() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// run does n ops and counts those that produced the expected value.
func run(op func() value, want value, n uint64) uint64 {
	var ok uint64
	for i := uint64(0); i < n; i++ {
		if want.equal(op()) {
			ok++
		}
	}
	return ok
}

func median(xs []float64) float64 {
	sort.Float64s(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// calibrate doubles the batch until it takes a twentieth of a sample, then sizes it to one.
func calibrate(op func() value, want value, sample time.Duration) (uint64, error) {
	target := sample.Seconds() / 20
	for iters := uint64(1); ; iters *= 2 {
		t := time.Now()
		ok := run(op, want, iters)
		el := time.Since(t).Seconds()
		if ok != iters {
			return 0, fmt.Errorf("%d of %d ops produced a wrong value", iters-ok, iters)
		}
		if el >= target || iters >= 1<<40 {
			b := uint64(sample.Seconds() / (el / float64(iters)))
			if b < 1 {
				b = 1
			}
			return b, nil
		}
	}
}

// measure times one implementation on one data set in one mode.
func measure(factory func() func() value, want value, mode string, s settings) (record, error) {
	op := factory()
	if got := op(); !want.equal(got) {
		return record{}, fmt.Errorf("extracted %v, expected %v", got, want)
	}
	batch, err := calibrate(op, want, s.sample)
	if err != nil {
		return record{}, err
	}
	threads := 1
	if mode == "parallel" {
		threads = s.threads
	}
	ops := make([]func() value, threads)
	ops[0] = op
	for i := 1; i < threads; i++ {
		ops[i] = factory()
	}
	var wrong uint64
	var mu sync.Mutex
	round := func(n uint64) {
		if threads == 1 {
			if ok := run(op, want, n); ok != n {
				wrong += n - ok
			}
			return
		}
		var wg sync.WaitGroup
		wg.Add(threads)
		for i := 0; i < threads; i++ {
			go func(op func() value) {
				defer wg.Done()
				if ok := run(op, want, n); ok != n {
					mu.Lock()
					wrong += n - ok
					mu.Unlock()
				}
			}(ops[i])
		}
		wg.Wait()
	}
	for t := time.Now(); time.Since(t) < s.warmup; {
		round(batch/4 + 1)
	}
	wall := make([]float64, 0, s.samples)
	cpu := make([]float64, 0, s.samples)
	for i := 0; i < s.samples; i++ {
		c0 := cpuNow()
		t0 := time.Now()
		round(batch)
		el := time.Since(t0)
		c := cpuNow() - c0
		wall = append(wall, float64(el.Nanoseconds())/float64(batch))
		cpu = append(cpu, float64(c.Nanoseconds())/float64(batch*uint64(threads)))
	}
	if wrong != 0 {
		return record{}, fmt.Errorf("%d ops produced a wrong value", wrong)
	}
	ns := median(wall)
	r := record{
		Suite: "codec", Lang: "go", Mode: mode, Threads: threads,
		NsPerOp: ns, CPUNsPerOp: median(cpu), OpsPerS: float64(threads) * 1e9 / ns,
		Samples: len(wall), Batch: batch,
	}
	if mode == "serial" {
		n := int(batch)
		if n > 1000 {
			n = 1000
		}
		allocs := testing.AllocsPerRun(n, func() { op() })
		r.AllocsPerOp = &allocs
	}
	return r, nil
}
