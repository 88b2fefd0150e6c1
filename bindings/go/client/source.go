package client

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	y3 "github.com/y3-dev/y3/bindings/go"
)

// Source sends data frames: an edge device, a script, a benchmark.
//
// Send encodes the frame at once (the payload may be reused when it returns) and queues it
// for the writer goroutine, which writes queued frames in batches. A lost connection is
// re-established, with Options.Backoff, on the next Send; a goaway from the router (it is
// shutting down) is returned once as an *Error of its kind (shutting_down), and the Send
// after that reconnects.
//
// Delivery is at most once: frames queued on a connection that breaks are lost. Close
// flushes, ends the write side and waits for the router to close the connection, so that
// every frame sent before it has been read by the router.
//
// A Source is safe for concurrent use; its calls are serialized.
type Source struct {
	addr string
	opts Options

	mu      sync.Mutex
	active  *sourceLink
	nextID  uint64
	session uint64
	closed  bool

	// done is closed by Close before it takes mu, so that a Send waiting for queue space
	// or reconnecting gives up (closed) and lets Close proceed.
	done     chan struct{}
	doneOnce sync.Once
}

// sourceLink is a source's connection and what its reader goroutine saw.
type sourceLink struct {
	l          *link
	goaway     atomic.Pointer[Goaway]
	readerDone chan struct{}
}

// ConnectSource connects (with backoff) and handshakes as a source. ctx bounds the
// connecting only.
//
// Errors: a goaway kind when the router refuses the handshake (unauthorized,
// version_mismatch, bad_handshake), tls, gave_up when it cannot be reached, ctx.Err().
func ConnectSource(ctx context.Context, addr string, opts Options) (*Source, error) {
	s := &Source{addr: addr, opts: opts.norm(), nextID: 1, done: make(chan struct{})}
	if _, err := s.ensure(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Session is the router's id for the current connection.
func (s *Source) Session() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.session
}

func (s *Source) ensure(ctx context.Context) (*sourceLink, error) {
	if s.active != nil {
		return s.active, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(doneContext{s.done}, cancel)
	defer stop()
	l, err := dialWithBackoff(ctx, s.addr, &s.opts, RoleSource, nil)
	if err != nil {
		select {
		case <-s.done:
			return nil, &Error{Kind: KindClosed}
		default:
		}
		return nil, err
	}
	s.session = l.session
	a := &sourceLink{l: l, readerDone: make(chan struct{})}
	go s.read(a)
	s.active = a
	return a, nil
}

// read watches for goaway (and reads to the end, so that TCP does not reset on close).
func (s *Source) read(a *sourceLink) {
	defer close(a.readerDone)
	var d Data
	for {
		f, err := a.l.r.NextData(&d)
		if err != nil {
			s.opts.Logger.Debug("source connection ended", "error", err)
			a.l.closeWrite()
			return
		}
		switch f := f.(type) {
		case Goaway:
			s.opts.Logger.Debug("source got goaway", "code", f.Code.Kind(), "reason", f.Reason)
			a.goaway.Store(&f)
			if s.opts.OnGoaway != nil {
				s.opts.OnGoaway(f)
			}
			// Stop sending: flush what is queued and end the write side.
			a.l.closeWrite()
		case Ping:
			a.l.tryEnqueue(Pong(f))
		}
	}
}

// dropBroken forgets a broken connection and returns the goaway that broke it, if any.
func (s *Source) dropBroken(a *sourceLink) *Goaway {
	if s.active == a {
		s.active = nil
	}
	a.l.closeWrite()
	a.l.close()
	return a.goaway.Load()
}

// Send queues payload under tag and returns the frame's id (1, 2, 3, ...).
//
// Errors: a goaway kind (shutting_down) once after the router sent one; gave_up or a
// refusal when reconnecting fails; too_long for a frame above MaxFrameLen; closed after
// Close.
func (s *Source) Send(tag uint32, payload []byte) (uint64, error) {
	return s.SendContext(context.Background(), tag, payload)
}

// SendContext is Send with a context bounding the wait for queue space and reconnection.
func (s *Source) SendContext(ctx context.Context, tag uint32, payload []byte) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID
	if payload == nil {
		payload = []byte{}
	}
	if err := s.sendLocked(ctx, Data{Tag: tag, ID: id, Payload: payload}); err != nil {
		return 0, err
	}
	return id, nil
}

// SendMarshal sends v as the Y3 packet of key tag, as y3.Marshal(tag, v) writes it
// without the root node (the bytes Rust's to_packet(tag) writes, which an Observer reads
// at path tag/field). tag must be a Marshal key (0x10..0x3f); for other data tags
// marshal the payload yourself and call Send.
func (s *Source) SendMarshal(tag uint32, v any) (uint64, error) {
	return s.SendMarshalContext(context.Background(), tag, v)
}

// SendMarshalContext is SendMarshal with a context.
func (s *Source) SendMarshalContext(ctx context.Context, tag uint32, v any) (uint64, error) {
	payload, err := MarshalPayload(tag, v)
	if err != nil {
		return 0, err
	}
	return s.SendContext(ctx, tag, payload)
}

// MarshalPayload is y3.Marshal(key, v) without the root node: the key's own packet.
func MarshalPayload(key uint32, v any) ([]byte, error) {
	buf, err := y3.Marshal(key, v)
	if err != nil {
		return nil, err
	}
	root, _, err := y3.Parse(buf)
	if err != nil {
		return nil, err
	}
	return root.Value(), nil
}

// SendData queues a complete data frame: id, hops and metadata as given. Later Sends
// continue after the largest id sent.
func (s *Source) SendData(ctx context.Context, d Data) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.Payload == nil {
		d.Payload = []byte{}
	}
	return s.sendLocked(ctx, d)
}

func (s *Source) sendLocked(ctx context.Context, d Data) error {
	if s.closed {
		return &Error{Kind: KindClosed}
	}
	if d.ID+1 > s.nextID {
		s.nextID = d.ID + 1
	}
	for range 2 {
		a, err := s.ensure(ctx)
		if err != nil {
			return err
		}
		if g := a.goaway.Load(); g != nil {
			s.dropBroken(a)
			return goawayError(*g)
		}
		err = enqueue(ctx, s.done, a.l, d)
		if err == nil {
			return nil
		}
		if KindOf(err) != KindClosed && KindOf(err) != KindIO && KindOf(err) != KindTimeout {
			return err // too_long, ctx.Err(): the connection is fine
		}
		// The connection broke: retry once on a new one.
		if g := s.dropBroken(a); g != nil {
			return goawayError(*g)
		}
	}
	return &Error{Kind: KindClosed}
}

// Flush waits until every frame queued so far has been written to the socket.
//
// Errors: closed (or the goaway kind) when the connection broke first; those frames may
// be lost.
func (s *Source) Flush(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.active
	if a == nil {
		if s.closed {
			return &Error{Kind: KindClosed}
		}
		return nil
	}
	if err := a.l.flush(ctx, s.done); err != nil {
		if ctx.Err() != nil {
			return err
		}
		if g := s.dropBroken(a); g != nil {
			return goawayError(*g)
		}
		return err
	}
	return nil
}

// Close flushes, ends the write side and waits (at most Options.Linger) for the router to
// close the connection, so that every frame sent has been read by the router. It returns
// the writer's error if the connection broke. Close is idempotent.
func (s *Source) Close() error {
	s.doneOnce.Do(func() { close(s.done) })
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	a := s.active
	s.active = nil
	if a == nil {
		return nil
	}
	return closeLink(a.l, a.readerDone, s.opts.Linger)
}

// closeLink ends a link gracefully: flush and end the write side, wait for the reader to
// see the router's close (at most linger), then release the stream.
func closeLink(l *link, readerDone <-chan struct{}, linger time.Duration) error {
	l.closeWrite()
	err := l.waitWriter(linger)
	t := time.NewTimer(linger)
	select {
	case <-readerDone:
	case <-t.C:
	}
	t.Stop()
	l.close()
	<-readerDone
	if err != nil && KindOf(err) == KindClosed {
		return nil
	}
	return err
}

// doneContext is a context that is done when its channel is closed.
type doneContext struct{ done <-chan struct{} }

func (doneContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c doneContext) Done() <-chan struct{}     { return c.done }
func (c doneContext) Err() error {
	select {
	case <-c.done:
		return context.Canceled
	default:
		return nil
	}
}
func (doneContext) Value(any) any { return nil }
