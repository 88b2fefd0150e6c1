package peer

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"
)

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

// SinkReport is the JSON summary of `yomo-peer sink`.
type SinkReport struct {
	// Received is every frame, duplicates included.
	Received int `json:"received"`
	// Unique is the number of distinct sequence numbers.
	Unique int `json:"unique"`
	// Missing is the number of sequence numbers in [seq_start, seq_start+count) never seen.
	Missing int `json:"missing"`
	// Duplicates is the number of frames whose sequence number had arrived before.
	Duplicates int `json:"duplicates"`
	// BadPayloads is the number of frames too short to hold a stamp.
	BadPayloads int `json:"bad_payloads"`
	// TidOK: at least one frame arrived and every frame had a non-empty yomo-tid.
	TidOK bool `json:"tid_ok"`
	// SourceIDOK: at least one frame arrived and every frame had a non-empty yomo-source-id.
	SourceIDOK bool `json:"source_id_ok"`
	// DistinctTids is the number of distinct yomo-tid values.
	DistinctTids int `json:"distinct_tids"`
	// SourceIDs are the distinct yomo-source-id values, sorted (at most 16).
	SourceIDs []string `json:"source_ids"`
	// Tags counts frames per tag, keyed "0x34".
	Tags map[string]int `json:"tags"`
	// P50us, P99us, P999us are one-way latency percentiles (nearest rank), microseconds:
	// receive time minus the stamp's send time, on one host's clock.
	P50us  float64 `json:"p50_us"`
	P99us  float64 `json:"p99_us"`
	P999us float64 `json:"p999_us"`
	// MaxUs is the largest latency, microseconds.
	MaxUs float64 `json:"max_us"`
	// Seconds is the time from the first frame to the last.
	Seconds float64 `json:"seconds"`
	// MsgPerS is Received / Seconds (0 with fewer than two frames).
	MsgPerS float64 `json:"msg_per_s"`
	// Error is set when the sink failed: connect error, or "timeout" before count arrived.
	Error string `json:"error,omitempty"`
}

// Report summarises what arrived; expect sequence numbers seqStart .. seqStart+count-1.
func (t *Tracker) Report(seqStart uint64, count int) SinkReport {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := SinkReport{
		Received:     t.received,
		Unique:       len(t.seqs),
		Duplicates:   t.duplicates,
		BadPayloads:  t.bad,
		TidOK:        t.received > 0 && t.tidMissing == 0,
		SourceIDOK:   t.received > 0 && t.srcMissing == 0,
		DistinctTids: len(t.tids),
		SourceIDs:    []string{},
		Tags:         map[string]int{},
	}
	r.Missing = t.missingLocked(seqStart, count)
	for id := range t.sources {
		r.SourceIDs = append(r.SourceIDs, id)
	}
	slices.Sort(r.SourceIDs)
	if len(r.SourceIDs) > 16 {
		r.SourceIDs = r.SourceIDs[:16]
	}
	for tag, n := range t.tags {
		r.Tags[FormatTag(tag)] = n
	}
	lat := slices.Clone(t.latencies)
	slices.Sort(lat)
	r.P50us = micros(percentile(lat, 0.50))
	r.P99us = micros(percentile(lat, 0.99))
	r.P999us = micros(percentile(lat, 0.999))
	if len(lat) > 0 {
		r.MaxUs = micros(lat[len(lat)-1])
	}
	if span := t.last.Sub(t.first); t.received > 1 && span > 0 {
		r.Seconds = span.Seconds()
		r.MsgPerS = float64(t.received) / r.Seconds
	}
	return r
}

// percentile is the nearest-rank q-quantile of sorted values, 0 when empty.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(rank, len(sorted)-1))]
}

// micros is d in microseconds, to 0.1 µs.
func micros(d time.Duration) float64 {
	return math.Round(float64(d)/100) / 10
}
