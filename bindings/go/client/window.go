package client

import (
	"context"
	"log/slog"
	"sync"
	"time"
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

// RetryFirst is how long a frame the router refused as no_subscriber waits before a
// durable client writes it again, the first time; each further retry of the frame doubles
// the wait, up to RetryMax (the Rust SDK's RETRY_FIRST and RETRY_MAX).
const RetryFirst = 100 * time.Millisecond

// RetryMax is the longest wait before a frame refused as no_subscriber is written again.
const RetryMax = 2 * time.Second

// keptData is one frame a window keeps, with the times the router answered it
// no_subscriber.
type keptData struct {
	d       Data
	retries uint32
}

// deferredData is a frame nobody took, kept until due to be written again.
type deferredData struct {
	due time.Time
	k   keptData
}

// window holds the frames a durable client (DurableSource, a durable StreamFunction) keeps
// until stored, oldest first, with the counts of the current connection: the Rust SDK's
// sdk/window.rs. A frame refused as no_subscriber is not forgotten but deferred: written
// again once its backoff passed (RetryFirst doubling to RetryMax), ahead of newer frames;
// deferred frames count in len. It is not safe for concurrent use: its owner guards it.
type window struct {
	unacked  []keptData     // owned copies: written on this connection, then to write
	deferred []deferredData // refused as no_subscriber, in the order refused
	written  int            // frames of unacked written on this connection
	stored   uint32         // the router's last count on this connection
	resent   uint64         // frames written again on a later connection
	retried  uint64         // times a frame was answered no_subscriber or not_stored and kept
	refused  refusals
}

func (w *window) len() int { return len(w.unacked) + len(w.deferred) }

// nextDue is when the first deferred frame is due (zero when none waits).
func (w *window) nextDue() time.Time {
	if len(w.deferred) == 0 {
		return time.Time{}
	}
	return w.deferred[0].due
}

// promoteDue makes the deferred frames due at now (from the front) the next to write.
func (w *window) promoteDue(now time.Time) {
	n := 0
	for n < len(w.deferred) && !w.deferred[n].due.After(now) {
		n++
	}
	if n == 0 {
		return
	}
	out := make([]keptData, 0, len(w.unacked)+n)
	out = append(out, w.unacked[:w.written]...)
	for _, d := range w.deferred[:n] {
		out = append(out, d.k)
	}
	out = append(out, w.unacked[w.written:]...)
	w.unacked = out
	clear(w.deferred[:n])
	w.deferred = w.deferred[n:]
	if len(w.deferred) == 0 {
		w.deferred = nil
	}
}

// keep keeps a copy of d (payload and raw metadata) until stored.
func (w *window) keep(d Data) {
	raw := d.RawMetadata
	if raw == nil && len(d.Metadata) > 0 {
		raw = AppendMetadata(nil, d.Metadata)
	}
	w.unacked = append(w.unacked, keptData{d: Data{Tag: d.Tag, Hops: d.Hops,
		RawMetadata: append([]byte{}, raw...), Payload: append([]byte{}, d.Payload...)}})
}

// peekUnwritten is the oldest frame this connection has not carried yet.
func (w *window) peekUnwritten() (Data, bool) {
	if w.written >= len(w.unacked) {
		return Data{}, false
	}
	return w.unacked[w.written].d, true
}

// wrote counts the frame peekUnwritten gave as written.
func (w *window) wrote() { w.written++ }

// ack applies the router's stored frame: the first st.Count frames of this connection
// (modulo 2^32) are handled, those in st.Refused refused (recorded, logged to log when not
// nil). A count past what was written forgets no more than was written; a run outside the
// frames the count newly covers is ignored. Frames refused as no_subscriber are deferred.
func (w *window) ack(st Stored, log *slog.Logger) {
	w.ackAt(st, log, time.Now())
}

// ackAt is ack as of now.
func (w *window) ackAt(st Stored, log *slog.Logger, now time.Time) {
	n := st.Count
	newly := int(min(uint64(n-w.stored), uint64(w.written)))
	var retry map[int]bool
	for _, run := range st.Refused {
		from := uint64(run.First - w.stored)
		to := min(from+uint64(run.Frames), uint64(newly))
		for i := from; i < to; i++ {
			if run.Reason.Retried() {
				if retry == nil {
					retry = map[int]bool{}
				}
				retry[int(i)] = true
			} else {
				w.refused.record(&w.unacked[i].d, run.Reason, log)
			}
		}
	}
	for i := 0; i < newly && len(retry) > 0; i++ {
		if !retry[i] {
			continue
		}
		k := w.unacked[i]
		w.retried++
		if log != nil {
			if w.retried == 1 {
				log.Warn("nobody subscribes to this tag yet: the router did not store the frame; "+
					"it is kept and sent again with backoff (up to 2 s) until a subscriber takes "+
					"it, as long as the client's window has room; further retries are logged at "+
					"debug level", "tag", k.d.Tag)
			} else {
				log.Debug("frame kept: no subscriber yet", "tag", k.d.Tag)
			}
		}
		wait := RetryMax
		if k.retries < 5 {
			wait = min(RetryFirst<<k.retries, RetryMax)
		}
		k.retries++
		w.deferred = append(w.deferred, deferredData{due: now.Add(wait), k: k})
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

// retriedCount reads, under mu, how many times a frame was answered no_subscriber or not_stored and kept.
func retriedCount(mu *sync.Mutex, w *window) uint64 {
	mu.Lock()
	defer mu.Unlock()
	return w.retried
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

// writeKept writes, in order, the kept frames l has not carried yet (deferred ones that are
// due first); mu guards w. A frame whose enqueueing fails stays kept, unwritten, and the
// error is returned.
func writeKept(ctx context.Context, abort <-chan struct{}, l *link, mu *sync.Mutex, w *window) error {
	mu.Lock()
	w.promoteDue(time.Now())
	mu.Unlock()
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
