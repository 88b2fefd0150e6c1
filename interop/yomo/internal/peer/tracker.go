package peer

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrIdle is what WaitUniqueOrIdle returns when frames stopped arriving before the count.
var ErrIdle = errors.New("no frame within the idle time")

// Frame is what a sink learns about one received data frame.
type Frame struct {
	Tag      uint32
	Payload  []byte
	TID      string // metadata yomo-tid
	SourceID string // metadata yomo-source-id
	At       time.Time
}

// Tracker counts received frames: per tag, per sequence number, transaction ids, source ids
// and one-way latency from the stamp. It is safe for concurrent use (YoMo runs every SFN
// handler call in its own goroutine).
type Tracker struct {
	mu          sync.Mutex
	received    int
	bad         int // payloads too short for a stamp
	tidMissing  int
	srcMissing  int
	duplicates  int
	tags        map[uint32]int
	seqs        map[uint64]int
	tids        map[string]struct{}
	sources     map[string]int
	maxSeq      uint64
	latencies   []time.Duration
	first, last time.Time
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker {
	return &Tracker{
		tags:    map[uint32]int{},
		seqs:    map[uint64]int{},
		tids:    map[string]struct{}{},
		sources: map[string]int{},
	}
}

// Observe records one frame.
func (t *Tracker) Observe(f Frame) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.received == 0 {
		t.first = f.At
	}
	t.last = f.At
	t.received++
	t.tags[f.Tag]++
	if f.TID == "" {
		t.tidMissing++
	} else {
		t.tids[f.TID] = struct{}{}
	}
	if f.SourceID == "" {
		t.srcMissing++
	} else {
		t.sources[f.SourceID]++
	}
	seq, sent, ok := Unstamp(f.Payload)
	if !ok {
		t.bad++
		return
	}
	t.seqs[seq]++
	t.maxSeq = max(t.maxSeq, seq)
	if t.seqs[seq] > 1 {
		t.duplicates++
	}
	t.latencies = append(t.latencies, f.At.Sub(time.Unix(0, sent)))
}

// Received is the number of frames observed.
func (t *Tracker) Received() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.received
}

// Unique is the number of distinct sequence numbers observed.
func (t *Tracker) Unique() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.seqs)
}

// SeqCount is how many times sequence number seq arrived.
func (t *Tracker) SeqCount(seq uint64) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seqs[seq]
}

// MaxSeq is the largest sequence number observed (0 when none).
func (t *Tracker) MaxSeq() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.maxSeq
}

// TagCount is how many frames arrived under tag.
func (t *Tracker) TagCount(tag uint32) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tags[tag]
}

// WaitUnique waits until n distinct sequence numbers arrived or ctx ends.
func (t *Tracker) WaitUnique(ctx context.Context, n int) error {
	return t.wait(ctx, func() bool { return len(t.seqs) >= n })
}

// WaitUniqueOrIdle waits until n distinct sequence numbers arrived, or, once a frame has
// arrived, until none arrived for idle (ErrIdle: the rest were lost on the way), or ctx ends.
func (t *Tracker) WaitUniqueOrIdle(ctx context.Context, n int, idle time.Duration) error {
	stalled := false
	err := t.wait(ctx, func() bool {
		if len(t.seqs) >= n {
			return true
		}
		stalled = t.received > 0 && time.Since(t.last) >= idle
		return stalled
	})
	if err == nil && stalled {
		return ErrIdle
	}
	return err
}

// WaitSeq waits until sequence number seq arrived or ctx ends.
func (t *Tracker) WaitSeq(ctx context.Context, seq uint64) error {
	return t.wait(ctx, func() bool { return t.seqs[seq] > 0 })
}

// WaitRange waits until every sequence number in [from, from+n) arrived or ctx ends.
func (t *Tracker) WaitRange(ctx context.Context, from uint64, n int) error {
	return t.wait(ctx, func() bool { return t.missingLocked(from, n) == 0 })
}

// Missing is how many sequence numbers in [from, from+n) have not arrived.
func (t *Tracker) Missing(from uint64, n int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.missingLocked(from, n)
}

func (t *Tracker) missingLocked(from uint64, n int) int {
	missing := 0
	for i := 0; i < n; i++ {
		if t.seqs[from+uint64(i)] == 0 {
			missing++
		}
	}
	return missing
}

// wait polls done (called with t.mu held) every few milliseconds until it holds or ctx ends.
func (t *Tracker) wait(ctx context.Context, done func() bool) error {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		t.mu.Lock()
		ok := done()
		t.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
