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
// It writes again by itself, as the Rust SDK's and Python's DurableSource: a goroutine it
// owns (its keeper, stopped by Close) reconnects with Options.Backoff (forever by default)
// when a connection ends with frames kept, writes every kept frame again, in order, on the
// new connection, and writes the frames nobody took when their retry is due. A source that
// sends rarely, or has stopped, needs no further call for what it sent to be delivered.
// Calls wait for the keeper's new connection meanwhile (bounded by their context); when
// reconnecting gives up (Backoff.Attempts), the next call returns gave_up and the keeper
// tries again on the call after it. Call Close to stop the keeper: a source dropped
// without Close keeps its goroutine and connection.
//
// Routers that do not know the extension (YoMo's zipper) never acknowledge: use Source
// with them. A DurableSource is safe for concurrent use: one call (or the keeper) writes
// at a time, and a call waiting for room or a connection lets the others run.
type DurableSource struct {
	addr string
	opts Options
	who  identity

	mu      sync.Mutex // one writer at a time: a call or the keeper; guards the fields below
	active  *durableLink
	fatal   error // a refusal that is not retried: returned by every later call
	failed  error // the keeper's reconnecting gave up: returned (once) by the next call
	wanted  bool  // a call waits for a connection (the keeper reconnects with nothing kept)
	closing bool  // Close began: a second Close returns nil
	closed  bool
	done    chan struct{} // closed by Close once it has waited: stops the keeper and its dial
	once    sync.Once

	wake       chan struct{} // (1 slot) wakes the keeper: a link ended, frames were deferred
	keeperDone chan struct{} // closed when the keeper has returned

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
	s := &DurableSource{addr: addr, opts: opts.norm(), done: make(chan struct{}), moved: make(chan struct{}),
		wake: make(chan struct{}, 1), keeperDone: make(chan struct{})}
	s.who = identity{id: newClientID(), typ: ClientSource, wantsAcks: true}
	l, err := dialUnlessDone(ctx, s.done, s.addr, &s.opts, &s.who)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.install(l)
	s.mu.Unlock()
	go s.keep()
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

// Retried is how many times the router answered a frame no_subscriber (nobody took it) or
// not_stored (JetStream did not store it) so far: each time the frame was kept and written
// again after a backoff.
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

// WaitStored waits until the router has handled every frame sent so far (the keeper
// reconnects and writes again as needed). Frames the router refused are not waited for:
// see Refused. With nothing kept it returns at once, connected or not.
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
		if s.closed {
			return &Error{Kind: KindClosed}
		}
		if s.fatal != nil {
			return s.fatal
		}
		if s.Unacked() == 0 {
			return nil
		}
		if err := s.ready(ctx); err != nil {
			return err
		}
		s.wmu.Lock()
		moved := s.moved
		s.wmu.Unlock()
		if err := s.writePending(ctx); err != nil {
			return err
		}
		if err := s.wait(ctx, moved); err != nil {
			return err
		}
	}
}

// wait lets go of mu until moved is closed (or a short while: the caller looks again),
// ctx ends or Close is done; it holds mu again when it returns. Another call, or the
// keeper, may run meanwhile.
func (s *DurableSource) wait(ctx context.Context, moved <-chan struct{}) error {
	s.mu.Unlock()
	defer s.mu.Lock()
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

// Close waits (bounded by ctx) until everything is handled, then stops the keeper, ends the
// connection, and every later call returns closed. It returns ctx.Err() when frames were
// left unstored, and an *Error of kind refused (field Frames) when the router refused any:
// Close returns nil only when every frame sent was stored. A second Close returns nil.
func (s *DurableSource) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	var err error
	if s.fatal == nil {
		err = s.waitStored(ctx)
	}
	s.closed = true
	s.once.Do(func() { close(s.done) })
	a := s.active
	s.active = nil
	s.mu.Unlock()
	<-s.keeperDone
	if a != nil {
		_ = closeLink(a.l, a.readerDone, s.opts.Linger)
	}
	if n := s.Refused(); err == nil && n > 0 {
		err = &Error{Kind: KindRefused, Frames: n}
	}
	return err
}

// ready waits (bounded by ctx) for a connection whose reader is alive, every kept frame
// written on it or being written: the keeper reconnects. It returns closed after Close,
// the refusal that ended the source, or the keeper's gave_up (once).
func (s *DurableSource) ready(ctx context.Context) error {
	for {
		if s.closed {
			return &Error{Kind: KindClosed}
		}
		if err := s.dropBroken(); err != nil {
			return err
		}
		if s.active != nil {
			return nil
		}
		if err := s.failed; err != nil {
			s.failed = nil
			return err
		}
		s.wanted = true
		s.wakeKeeper()
		s.wmu.Lock()
		moved := s.moved
		s.wmu.Unlock()
		if err := s.wait(ctx, moved); err != nil {
			return err
		}
	}
}

// dropBroken forgets the connection when it is broken, remembering for good the refusal
// that ended it (one that is not retryable), and returns that refusal, if any.
func (s *DurableSource) dropBroken() error {
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
		}
	}
	return s.fatal
}

// install makes l the connection (under mu): every kept frame is to be written on it.
func (s *DurableSource) install(l *link) {
	s.wmu.Lock()
	s.gen++
	s.win.reconnected()
	a := &durableLink{l: l, gen: s.gen, readerDone: make(chan struct{})}
	s.wmu.Unlock()
	s.active = a
	go s.read(a)
}

// keepLook is how long the keeper sleeps at most between looks; it is woken when a
// connection ends, frames are deferred, or a call waits for a connection.
const keepLook = 500 * time.Millisecond

// keepSlice is how long the keeper writes at most per look while holding the call mutex:
// a connection whose queue stays full (a stopped router) holds calls no longer than this,
// so their contexts and Close's still bound them. It goes on after keepYield.
const (
	keepSlice = 50 * time.Millisecond
	keepYield = 10 * time.Millisecond
)

// keep is the keeper: when the connection ends with frames kept (or a call waits for
// one), it reconnects with the source's backoff and writes every kept frame again, in
// order; while connected, it writes the frames nobody took when their retry is due. It
// returns once Close is done waiting.
func (s *DurableSource) keep() {
	defer close(s.keeperDone)
	t := time.NewTimer(keepLook)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-s.wake:
		case <-t.C:
		}
		next, stop := s.tend()
		if stop {
			return
		}
		t.Reset(next)
	}
}

// tend is one look of the keeper: it reconnects if needed (dialing without mu, so that
// calls can give up meanwhile), writes what the connection has not carried, and says how
// long until the next look, or to stop (after Close).
func (s *DurableSource) tend() (next time.Duration, stop bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, true
	}
	if s.dropBroken() != nil || s.failed != nil {
		return keepLook, false // a call reports it; the keeper waits for the next
	}
	if s.active == nil {
		if !s.wanted && s.Unacked() == 0 {
			return keepLook, false
		}
		s.mu.Unlock()
		l, err := dialUnlessDone(context.Background(), s.done, s.addr, &s.opts, &s.who)
		s.mu.Lock()
		if s.closed {
			if err == nil {
				l.close()
			}
			return 0, true
		}
		if err != nil {
			if isRefusal(err) {
				s.fatal = err
			} else {
				s.failed = err
			}
			s.bump()
			return keepLook, false
		}
		s.install(l)
		s.wanted = false
		if n := s.Unacked(); n > 0 {
			s.opts.Logger.Info("durable source reconnected; writing again what was not stored",
				"addr", s.addr, "frames", n)
		}
	}
	// A broken link is marked; too_long cannot come back (SendData rules it out).
	ctx, cancel := context.WithTimeout(context.Background(), keepSlice)
	err := s.writePending(ctx)
	cancel()
	s.bump()
	if err != nil {
		return keepYield, false // the queue is full: let the calls in, then go on
	}
	s.wmu.Lock()
	due := s.win.nextDue()
	s.wmu.Unlock()
	if due.IsZero() {
		return keepLook, false
	}
	return min(max(time.Until(due), time.Millisecond), keepLook), false
}

// wakeKeeper wakes the keeper (a wake is kept when it is busy).
func (s *DurableSource) wakeKeeper() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// writePending writes the kept frames this connection has not carried yet (the deferred
// ones that are due first). A connection that breaks meanwhile is marked broken: the
// keeper reconnects and writes them again.
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
		s.wakeKeeper()
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

// signal applies a stored count of connection gen (if any) and wakes the waiters, and the
// keeper when the connection ended (stored is nil) or frames were deferred.
func (s *DurableSource) signal(gen uint64, stored *Stored) {
	s.wmu.Lock()
	if stored != nil && gen == s.gen {
		s.win.ack(*stored, s.opts.Logger)
	}
	close(s.moved)
	s.moved = make(chan struct{})
	s.wmu.Unlock()
	if stored == nil || len(stored.Refused) > 0 {
		s.wakeKeeper()
	}
}

// bump wakes the calls waiting for the window or a connection.
func (s *DurableSource) bump() {
	s.wmu.Lock()
	close(s.moved)
	s.moved = make(chan struct{})
	s.wmu.Unlock()
}
