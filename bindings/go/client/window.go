package client

import (
	"context"
	"sync"
)

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

// ack applies the router's count: the first n frames of this connection (modulo 2^32) are
// stored. A count past what was written forgets no more than was written.
func (w *window) ack(n uint32) {
	newly := int(min(uint64(n-w.stored), uint64(w.written)))
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
