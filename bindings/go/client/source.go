package client

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	y3 "github.com/y3-dev/y3/bindings/go"
)

// Reserved tags: a router closes the connection of a client writing one (reserved_tag), and
// YoMo clients then stop for good. Send refuses them locally instead.
const (
	ReservedTagMin = 0xf000
	ReservedTagMax = 0xffff
)

// Source sends data frames: an edge device, a script, a benchmark. It never receives.
//
// Every frame carries the metadata yomo-source-id (the source's id, see ID) and a fresh
// yomo-tid, as YoMo's sources write them. Send encodes the frame at once (the payload may
// be reused when it returns) and queues it for the writer goroutine, which writes queued
// frames in batches. A lost connection is re-established, with Options.Backoff (forever
// by default), on the next Send, which waits for it: a source outlives a router restart.
// A goaway that invites the client back (shutting_down) is passed to Options.OnGoaway and
// logged, and the next Send reconnects. A refusal that is not
// retryable (a rejected frame, a goaway or QUIC close whose code says so) ends the source:
// every later Send returns it.
//
// Delivery is at most once: frames queued on a connection that breaks are lost. Close
// flushes, ends the write side and waits for the router to close the connection, so that
// every frame sent before it has been read by the router.
//
// A Source is safe for concurrent use; its calls are serialized.
type Source struct {
	addr string
	opts Options
	who  identity

	mu     sync.Mutex
	active *sourceLink
	fatal  error // a refusal that is not retried: returned by every later call
	closed bool

	// done is closed by Close before it takes mu, so that a Send waiting for queue space
	// or reconnecting gives up (closed) and lets Close proceed.
	done     chan struct{}
	doneOnce sync.Once
}

// sourceLink is a source's connection and what its reader goroutine saw.
type sourceLink struct {
	l          *link
	end        atomic.Pointer[Error] // the goaway, rejection or close that ended it
	readerDone chan struct{}
}

// ConnectSource connects (with backoff) and handshakes as a source (client type 0x5f).
// ctx bounds the connecting only.
//
// Errors: a refusal kind when the router refuses the handshake (unauthorized,
// version_mismatch, bad_handshake; rejected from a YoMo zipper), tls, gave_up when it
// cannot be reached, ctx.Err().
func ConnectSource(ctx context.Context, addr string, opts Options) (*Source, error) {
	s := &Source{addr: addr, opts: opts.norm(), done: make(chan struct{})}
	s.who = identity{id: newClientID(), typ: ClientSource}
	if _, err := s.ensure(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// ID is the source's client id without its reconnect suffix: the yomo-source-id of every
// frame it writes. Handshakes carry "<ID>-0", "<ID>-1", ... (one per connection attempt).
func (s *Source) ID() string { return s.who.id.base }

func (s *Source) ensure(ctx context.Context) (*sourceLink, error) {
	if s.fatal != nil {
		return nil, s.fatal
	}
	if s.active != nil {
		return s.active, nil
	}
	l, err := dialUnlessDone(ctx, s.done, s.addr, &s.opts, &s.who)
	if err != nil {
		if isRefusal(err) {
			s.fatal = err
		}
		return nil, err
	}
	a := &sourceLink{l: l, readerDone: make(chan struct{})}
	go s.read(a)
	s.active = a
	return a, nil
}

// isRefusal reports whether err is the router's refusal that must not be retried.
func isRefusal(err error) bool {
	var e *Error
	return errors.As(err, &e) && isRefusalKind(e.Kind) && !e.Retryable()
}

// closeRefusal is the refusal a connection's end names (a QUIC close with its reason), if
// it names one other than normal.
func closeRefusal(err error) *Error {
	var e *Error
	if errors.As(err, &e) && isRefusalKind(e.Kind) && e.Kind != KindNormal {
		return e
	}
	return nil
}

// read watches for goaway and rejected frames and reads to the end (so that TCP does not
// reset on close). Data frames are not routed to sources; any that come are dropped.
func (s *Source) read(a *sourceLink) {
	defer close(a.readerDone)
	watch(a.l, &s.opts, &a.end, "source", nil)
	a.l.closeWrite()
}

// watch reads a sending client's connection to its end. It remembers in end the goaway,
// rejection or close that ended it, and hands every stored count to stored; a client
// without stored (a plain source) stops sending at a goaway or rejection, flushing what is
// queued and ending the write side, while a durable one keeps reading for the counts the
// router sends before it closes. who names the client in the logs.
func watch(l *link, o *Options, end *atomic.Pointer[Error], who string, stored func(Stored)) {
	var d Data
	for {
		f, err := l.nextData(&d)
		if err != nil {
			o.Logger.Debug(who+" connection ended", "error", err)
			if e := closeRefusal(err); e != nil {
				end.CompareAndSwap(nil, e)
			}
			return
		}
		switch f := f.(type) {
		case Stored:
			if stored != nil {
				stored(f)
			}
		case Goaway:
			o.Logger.Debug(who+" got goaway", "code", f.Code, "message", f.Message)
			end.CompareAndSwap(nil, goawayError(f))
			if o.OnGoaway != nil {
				o.OnGoaway(f)
			}
			if stored == nil {
				l.closeWrite()
			}
		case Rejected:
			o.Logger.Warn(who+" rejected", "code", f.Code, "message", f.Message)
			end.CompareAndSwap(nil, rejectedError(f))
			if stored == nil {
				l.closeWrite()
			}
		}
	}
}

// dropBroken forgets a broken connection and returns the refusal that ended it, if any
// (remembered for good when it is not retryable).
func (s *Source) dropBroken(a *sourceLink) error {
	if s.active == a {
		s.active = nil
	}
	a.l.closeWrite()
	a.l.close()
	if e := a.end.Load(); e != nil {
		if e.Retryable() {
			// The router invites the client back (it is shutting down or restarting):
			// not an error; the next send reconnects.
			s.opts.Logger.Info("the router closed the connection; reconnecting",
				"addr", s.addr, "kind", e.Kind, "reason", e.Reason)
			return nil
		}
		s.fatal = e
		return e
	}
	return nil
}

// Send queues payload under tag, with the metadata yomo-source-id and a fresh yomo-tid,
// which it returns.
//
// Errors: reserved_tag for a tag in 0xf000..0xffff (nothing is sent); a refusal kind, for
// good, after the router sent a goaway that is not retryable (a goaway that invites the
// client back, shutting_down, is logged and the send reconnects, waiting for the router
// with Options.Backoff, forever by default); gave_up or a refusal when reconnecting fails; too_long for a frame above MaxFrameLen;
// closed after Close.
func (s *Source) Send(tag uint32, payload []byte) (tid string, err error) {
	return s.SendContext(context.Background(), tag, payload)
}

// SendContext is Send with a context bounding the wait for queue space and reconnection.
func (s *Source) SendContext(ctx context.Context, tag uint32, payload []byte) (tid string, err error) {
	return s.send(ctx, tag, payload, "")
}

// SendWithTarget is Send with the metadata yomo-target = target: the router delivers the
// frame only to the stream functions whose wanted target equals it (YoMo's
// WriteWithTarget). An empty target is Send.
func (s *Source) SendWithTarget(tag uint32, payload []byte, target string) (tid string, err error) {
	return s.send(context.Background(), tag, payload, target)
}

func (s *Source) send(ctx context.Context, tag uint32, payload []byte, target string) (string, error) {
	if tag >= ReservedTagMin && tag <= ReservedTagMax {
		return "", &Error{Kind: KindReservedTag, Code: CodeReservedTag}
	}
	tid := NewID()
	var scratch [128]byte
	md := scratch[:0]
	if target == "" {
		md = appendMetadataPairs(md, MetaSourceID, s.who.id.base, MetaTID, tid)
	} else {
		md = appendMetadataPairs(md, MetaSourceID, s.who.id.base, MetaTarget, target, MetaTID, tid)
	}
	if payload == nil {
		payload = []byte{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.sendLocked(ctx, Data{Tag: tag, RawMetadata: md, Payload: payload}); err != nil {
		return "", err
	}
	return tid, nil
}

// SendMarshal sends v as the Y3 packet of key tag, as y3.Marshal(tag, v) writes it
// without the root node (the bytes Rust's to_packet(tag) writes, which an Observer reads
// at path tag/field). tag must be a Marshal key (0x10..0x3f); for other data tags
// marshal the payload yourself and call Send.
func (s *Source) SendMarshal(tag uint32, v any) (tid string, err error) {
	return s.SendMarshalContext(context.Background(), tag, v)
}

// SendMarshalContext is SendMarshal with a context.
func (s *Source) SendMarshalContext(ctx context.Context, tag uint32, v any) (tid string, err error) {
	payload, err := MarshalPayload(tag, v)
	if err != nil {
		return "", err
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

// SendData queues a complete data frame as given: tag, metadata (nothing added), payload
// and hops. Reserved tags are not checked.
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
	for range 2 {
		a, err := s.ensure(ctx)
		if err != nil {
			return err
		}
		if e := a.end.Load(); e != nil {
			if err := s.dropBroken(a); err != nil {
				return err
			}
			continue // a goaway inviting the client back: reconnect
		}
		err = enqueue(ctx, s.done, a.l, d)
		if err == nil {
			return nil
		}
		if KindOf(err) != KindClosed && KindOf(err) != KindIO && KindOf(err) != KindTimeout {
			return err // too_long, ctx.Err(): the connection is fine
		}
		// The connection broke: retry once on a new one.
		if e := s.dropBroken(a); e != nil {
			return e
		}
	}
	return &Error{Kind: KindClosed}
}

// Flush waits until every frame queued so far has been written to the socket.
//
// Errors: closed (or the refusal) when the connection broke first; those frames may be
// lost.
func (s *Source) Flush(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.active
	if a == nil {
		if s.closed {
			return &Error{Kind: KindClosed}
		}
		return s.fatal
	}
	if err := a.l.flush(ctx, s.done); err != nil {
		if ctx.Err() != nil {
			return err
		}
		if e := s.dropBroken(a); e != nil {
			return e
		}
		return err
	}
	return nil
}

// Close flushes, ends the write side and waits (at most Options.Linger) for the router to
// close the connection, so that every frame sent has been read by the router (a YoMo
// zipper never closes: Close then takes the whole Linger). It returns the writer's error
// if the connection broke. Close is idempotent.
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

// dialUnlessDone dials with backoff, giving up (closed) when done is closed first: Close
// does not wait for a reconnection.
func dialUnlessDone(ctx context.Context, done <-chan struct{}, addr string, o *Options, who *identity) (*link, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(doneContext{done}, cancel)
	defer stop()
	l, err := dialWithBackoff(ctx, addr, o, who)
	if err != nil {
		select {
		case <-done:
			return nil, &Error{Kind: KindClosed}
		default:
		}
	}
	return l, err
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
