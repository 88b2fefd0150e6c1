package peer

import (
	"math"
	"slices"
	"time"
)

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
