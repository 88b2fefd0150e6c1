package client

import (
	"context"
	"log/slog"
	"sync"
)

// MaxRefusalsKept is how many refused frames a durable client keeps the details of (the
// first ones); every refusal is counted.
const MaxRefusalsKept = 1024

// Refused is one data frame the router refused (spec/frames.md "Stored acknowledgements"):
// handled, delivered to no one, and not sent again.
type Refused struct {
	Tag    uint32
	TID    string // its yomo-tid ("" when it had none)
	Reason RefusedReason
}

// refusals counts a durable client's refused frames, by reason, and keeps the first
// MaxRefusalsKept.
type refusals struct {
	count    uint64
	byReason map[RefusedReason]uint64
	kept     []Refused
}

// record notes d as refused for reason; the first refusal of each reason is logged as a
// warning, later ones at debug level.
func (r *refusals) record(d *Data, reason RefusedReason, log *slog.Logger) {
	var tid string
	_, _ = walkMetadata(d.RawMetadata, func(k, v []byte) {
		if string(k) == MetaTID {
			tid = string(v)
		}
	})
	if r.byReason == nil {
		r.byReason = map[RefusedReason]uint64{}
	}
	r.count++
	r.byReason[reason]++
	if log != nil {
		if r.byReason[reason] == 1 {
			log.Warn("the router refused a frame (delivered to no one, not sent again); further "+
				"refusals for this reason are logged at debug level",
				"tag", d.Tag, "tid", tid, "reason", reason.String())
		} else {
			log.Debug("frame refused", "tag", d.Tag, "tid", tid, "reason", reason.String())
		}
	}
	if len(r.kept) < MaxRefusalsKept {
		r.kept = append(r.kept, Refused{Tag: d.Tag, TID: tid, Reason: reason})
	}
}

// maxUnacked is the most frames a DurableSource keeps unacknowledged; Send waits past it.
const maxUnacked = 16 << 10

// window holds the frames a durable client (DurableSource, a durable StreamFunction) keeps
// until stored, oldest first, with the counts of the current connection: the Rust SDK's
// sdk/window.rs. It is not safe for concurrent use: its owner guards it.
type window struct {
	unacked []Data // owned copies
	written int    // frames of unacked written on this connection
	stored  uint32 // the router's last count on this connection
	resent  uint64 // frames written again on a later connection
	refused refusals
}

func (w *window) len() int { return len(w.unacked) }

// keep keeps a copy of d (payload and raw metadata) until stored.
func (w *window) keep(d Data) {
	raw := d.RawMetadata
	if raw == nil && len(d.Metadata) > 0 {
		raw = AppendMetadata(nil, d.Metadata)
	}
	w.unacked = append(w.unacked, Data{Tag: d.Tag, Hops: d.Hops,
		RawMetadata: append([]byte{}, raw...), Payload: append([]byte{}, d.Payload...)})
}

// peekUnwritten is the oldest frame this connection has not carried yet.
func (w *window) peekUnwritten() (Data, bool) {
	if w.written >= len(w.unacked) {
		return Data{}, false
	}
	return w.unacked[w.written], true
}

// wrote counts the frame peekUnwritten gave as written.
func (w *window) wrote() { w.written++ }

// ack applies the router's stored frame: the first st.Count frames of this connection
// (modulo 2^32) are handled, those in st.Refused refused (recorded, logged to log when not
// nil). A count past what was written forgets no more than was written; a run outside the
// frames the count newly covers is ignored.
func (w *window) ack(st Stored, log *slog.Logger) {
	n := st.Count
	newly := int(min(uint64(n-w.stored), uint64(w.written)))
	for _, run := range st.Refused {
		from := uint64(run.First - w.stored)
		to := min(from+uint64(run.Frames), uint64(newly))
		for i := from; i < to; i++ {
			w.refused.record(&w.unacked[i], run.Reason, log)
		}
	}
	clear(w.unacked[:newly])
	w.unacked = w.unacked[newly:]
	w.written -= newly
	w.stored = n
	if len(w.unacked) == 0 {
		w.unacked = nil // let the drained backing array go
	}
}

// reconnected starts a new connection: every kept frame is to be written again.
func (w *window) reconnected() {
	w.resent += uint64(w.written)
	w.written, w.stored = 0, 0
}

// counts reads how many frames w keeps and how many it wrote again on a later connection,
// under mu (the Unacked and Resent of both durable clients).
func counts(mu *sync.Mutex, w *window) (unacked int, resent uint64) {
	mu.Lock()
	defer mu.Unlock()
	return w.len(), w.resent
}

// refusedCounts reads, under mu, how many frames the router refused, and the first ones.
func refusedCounts(mu *sync.Mutex, w *window) (count uint64, kept []Refused) {
	mu.Lock()
	defer mu.Unlock()
	return w.refused.count, append([]Refused(nil), w.refused.kept...)
}

// writeKept writes, in order, the kept frames l has not carried yet; mu guards w. A frame
// whose enqueueing fails stays kept, unwritten, and the error is returned.
func writeKept(ctx context.Context, abort <-chan struct{}, l *link, mu *sync.Mutex, w *window) error {
	for {
		mu.Lock()
		d, ok := w.peekUnwritten()
		mu.Unlock()
		if !ok {
			return nil
		}
		if err := enqueue(ctx, abort, l, d); err != nil {
			return err
		}
		mu.Lock()
		w.wrote()
		mu.Unlock()
	}
}
