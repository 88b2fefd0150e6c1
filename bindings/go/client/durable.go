package client

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// DurableSource is a source whose frames survive a lost connection and a restarted router,
// as the Rust SDK's DurableSource: it asks the router for stored acknowledgements
// (handshake field 32, spec/frames.md "Stored acknowledgements"), keeps every frame until
// the router says it is stored (routed, and for a durable tag of the federation, in
// JetStream), and writes again, in order, whatever was not acknowledged when a connection
// ended. Delivery is at least once; a frame written twice carries the same yomo-tid, which
// the federation's durable tags de-duplicate.
//
// A frame the router refuses (over its frame limit, past its hop limit, a loop:
// spec/frames.md) is handled but delivered to no one: it is not written again, it is
// counted in Refused with its reason (Refusals), the first of each reason is logged, and
// Close reports it (error kind refused).
//
// A frame nobody took (no subscriber to its tag yet: refused as no_subscriber) was not
// stored: the source keeps it and writes it again after a backoff (RetryFirst, doubled per
// retry of the frame, at most RetryMax) until a subscriber takes it, counting each retry in
// Retried and logging the first. It stays in the window meanwhile, so a tag nobody
// subscribes to eventually fills it and Send waits; Close reports such frames as unstored.
//
// It has no goroutine that reconnects on its own (unlike the Rust SDK's and Python's
// DurableSource): after a lost connection, what it keeps, and frames nobody took whose
// retry is due, are written again only by the next Send, WaitStored or Close. A source
// that sends rarely or has stopped calls WaitStored to have them delivered.
//
// Routers that do not know the extension (YoMo's zipper) never acknowledge: use Source
// with them. A DurableSource is safe for concurrent use; its calls are serialized.
type DurableSource struct {
	addr string
	opts Options
	who  identity

	mu     sync.Mutex // serializes the calls
	active *durableLink
	fatal  error // a refusal that is not retried: returned by every later call
	closed bool
	done   chan struct{}
	once   sync.Once

	wmu   sync.Mutex // guards win, gen and moved (shared with the reader goroutine)
	win   window
	gen   uint64        // the connection win's counts belong to
	moved chan struct{} // closed (and replaced) when the window moved or a link broke
}

// durableLink is one connection of a DurableSource and what its reader saw.
type durableLink struct {
	l          *link
	gen        uint64
	broken     atomic.Bool
	end        atomic.Pointer[Error] // the goaway, rejection or close that ended it
	readerDone chan struct{}
}

// ConnectDurableSource connects (with backoff) and handshakes as a source that wants
// stored acknowledgements. ctx bounds the connecting only.
//
// Errors: as ConnectSource.
func ConnectDurableSource(ctx context.Context, addr string, opts Options) (*DurableSource, error) {
	s := &DurableSource{addr: addr, opts: opts.norm(), done: make(chan struct{}), moved: make(chan struct{})}
	s.who = identity{id: newClientID(), typ: ClientSource, wantsAcks: true}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ensure(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// ID is the source's client id without its reconnect suffix: the yomo-source-id of the
// frames Send writes.
func (s *DurableSource) ID() string { return s.who.id.base }

// Unacked is how many frames are kept, written or not, and not yet stored.
func (s *DurableSource) Unacked() int {
	n, _ := counts(&s.wmu, &s.win)
	return n
}

// Resent is how many frames were written again on a new connection so far.
func (s *DurableSource) Resent() uint64 {
	_, n := counts(&s.wmu, &s.win)
	return n
}

// Refused is how many frames the router refused so far (delivered to no one, not sent
// again).
func (s *DurableSource) Refused() uint64 {
	n, _ := refusedCounts(&s.wmu, &s.win)
	return n
}

// Retried is how many times the router answered a frame no_subscriber (nobody took it) so
// far: each time the frame was kept and written again after a backoff.
func (s *DurableSource) Retried() uint64 { return retriedCount(&s.wmu, &s.win) }

// Refusals lists the first MaxRefusalsKept refused frames, with each one's reason.
func (s *DurableSource) Refusals() []Refused {
	_, kept := refusedCounts(&s.wmu, &s.win)
	return kept
}

// Send queues payload under tag, with the metadata yomo-source-id and a fresh yomo-tid
// (returned); the frame is kept until stored. It waits while Unacked is at its bound
// (16,384 frames).
//
// Errors: reserved_tag; too_long for a frame above MaxFrameLen; a refusal that is not
// retryable; gave_up when reconnecting fails; closed after Close.
func (s *DurableSource) Send(tag uint32, payload []byte) (tid string, err error) {
	return s.SendContext(context.Background(), tag, payload)
}

// SendContext is Send with a context bounding the wait for room and reconnection (a frame
// already kept stays kept when ctx ends while it is written).
func (s *DurableSource) SendContext(ctx context.Context, tag uint32, payload []byte) (tid string, err error) {
	if tag >= ReservedTagMin && tag <= ReservedTagMax {
		return "", &Error{Kind: KindReservedTag, Code: CodeReservedTag}
	}
	tid = NewID()
	md := appendMetadataPairs(nil, MetaSourceID, s.who.id.base, MetaTID, tid)
	return tid, s.SendData(ctx, Data{Tag: tag, RawMetadata: md, Payload: payload})
}

// SendData queues a complete data frame as given (it should carry a yomo-tid for
// de-duplication); it is copied, and kept until stored.
//
// Errors: as Send.
func (s *DurableSource) SendData(ctx context.Context, d Data) error {
	if body := d.bodyLen(); body > frameLimit(s.opts.MaxFrameLen) {
		return &Error{Kind: KindTooLong, Declared: uint64(body), Limit: uint64(frameLimit(s.opts.MaxFrameLen))}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if err := s.ready(ctx); err != nil {
			return err
		}
		s.wmu.Lock()
		full, moved := s.win.len() >= maxUnacked, s.moved
		if !full {
			s.win.keep(d)
		}
		s.wmu.Unlock()
		if !full {
			return s.writePending(ctx)
		}
		// Frames nobody took wait in the window: write those that are due.
		if err := s.writePending(ctx); err != nil {
			return err
		}
		if err := s.wait(ctx, moved); err != nil {
			return err
		}
	}
}

// WaitStored waits until the router has handled every frame sent so far, reconnecting and
// writing again as needed. Frames the router refused are not waited for: see Refused.
//
// Errors: ctx.Err() when ctx ends first (frames are still kept); a refusal, gave_up,
// closed.
func (s *DurableSource) WaitStored(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waitStored(ctx)
}

func (s *DurableSource) waitStored(ctx context.Context) error {
	for {
		if err := s.ready(ctx); err != nil {
			return err
		}
		s.wmu.Lock()
		empty, moved := s.win.len() == 0, s.moved
		s.wmu.Unlock()
		if empty {
			return nil
		}
		if err := s.writePending(ctx); err != nil {
			return err
		}
		if err := s.wait(ctx, moved); err != nil {
			return err
		}
	}
}

// wait waits until moved is closed (or a short while: the caller looks again), ctx ends
// or Close begins.
func (s *DurableSource) wait(ctx context.Context, moved <-chan struct{}) error {
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-moved:
	case <-t.C:
	case <-s.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// Close waits (bounded by ctx) until everything is handled, then ends the connection, and
// every later call returns closed. It returns ctx.Err() when frames were left unstored,
// and an *Error of kind refused (field Frames) when the router refused any: Close returns
// nil only when every frame sent was stored. A second Close returns nil.
func (s *DurableSource) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	var err error
	if s.fatal == nil {
		err = s.waitStored(ctx)
	}
	s.closed = true
	s.once.Do(func() { close(s.done) })
	if a := s.active; a != nil {
		s.active = nil
		_ = closeLink(a.l, a.readerDone, s.opts.Linger)
	}
	if n := s.Refused(); err == nil && n > 0 {
		err = &Error{Kind: KindRefused, Frames: n}
	}
	return err
}

// ready is closed after Close, else ensure's answer.
func (s *DurableSource) ready(ctx context.Context) error {
	if s.closed {
		return &Error{Kind: KindClosed}
	}
	return s.ensure(ctx)
}

// ensure makes sure of a connection whose reader is alive, every kept frame written on it.
func (s *DurableSource) ensure(ctx context.Context) error {
	if s.fatal != nil {
		return s.fatal
	}
	if a := s.active; a != nil && a.broken.Load() {
		s.active = nil
		a.l.closeWrite()
		a.l.close()
		<-a.readerDone
		if e := a.end.Load(); e != nil && !e.Retryable() {
			s.fatal = e
			return e
		}
	}
	if s.active != nil {
		return nil
	}
	l, err := dialUnlessDone(ctx, s.done, s.addr, &s.opts, &s.who)
	if err != nil {
		if isRefusal(err) {
			s.fatal = err
		}
		return err
	}
	s.wmu.Lock()
	s.gen++
	s.win.reconnected()
	a := &durableLink{l: l, gen: s.gen, readerDone: make(chan struct{})}
	s.wmu.Unlock()
	go s.read(a)
	s.active = a
	return s.writePending(ctx)
}

// writePending writes the kept frames this connection has not carried yet. A connection
// that breaks meanwhile is marked broken: the next call reconnects and writes them again.
func (s *DurableSource) writePending(ctx context.Context) error {
	a := s.active
	if a == nil {
		return nil
	}
	if err := writeKept(ctx, s.done, a.l, &s.wmu, &s.win); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if KindOf(err) == KindTooLong {
			return err // checked by SendData; a frame that grew cannot happen
		}
		a.broken.Store(true)
	}
	return nil
}

// read applies the router's stored counts to the window, remembers a goaway or
// rejection, and marks the link broken when it ends.
func (s *DurableSource) read(a *durableLink) {
	defer close(a.readerDone)
	watch(a.l, &s.opts, &a.end, "durable source", func(st Stored) { s.signal(a.gen, &st) })
	a.broken.Store(true)
	s.signal(a.gen, nil)
}

// signal applies a stored count of connection gen (if any) and wakes the waiters.
func (s *DurableSource) signal(gen uint64, stored *Stored) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if stored != nil && gen == s.gen {
		s.win.ack(*stored, s.opts.Logger)
	}
	close(s.moved)
	s.moved = make(chan struct{})
}
