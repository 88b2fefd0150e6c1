package client

import (
	"bufio"
	"context"
	"errors"
	"io"
	"sync"
	"time"
)

// writeBuffer is the write buffer: frames queued together are written with one call.
const writeBuffer = 64 << 10

// maxBatch is the most frames fed into the write buffer between flushes.
const maxBatch = 1024

// outMsg is a message to the writer goroutine: an encoded frame, or a flush request.
type outMsg struct {
	frame *[]byte
	ack   chan error
}

var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

func putFrame(b *[]byte) {
	if cap(*b) <= writeBuffer {
		*b = (*b)[:0]
		framePool.Put(b)
	}
}

// link is one established connection: the handshake is done, a writer goroutine drains the
// send queue into a bufio.Writer and flushes whenever the queue runs empty.
type link struct {
	s    Stream
	r    *FrameReader // read by exactly one goroutine, the client's
	opts *Options
	id   string // the handshake's id

	// early holds data frames that arrived before the handshake ack (the router may route
	// to a function as soon as it has subscribed it), owned, to be read first.
	early []Data

	out     chan outMsg
	closing chan struct{} // closed by closeWrite: drain, flush, CloseWrite, stop
	dead    chan struct{} // closed when the writer has stopped
	werr    error         // the writer's error, valid once dead is closed

	closeWriteOnce sync.Once
	closeOnce      sync.Once
}

// maxEarly is the most data frames kept from before the handshake ack.
const maxEarly = 1024

// maxRedirects is the most connect-to frames followed in a row.
const maxRedirects = 4

// identity is who a client says it is in every handshake.
type identity struct {
	id        *clientID
	typ       ClientType
	observed  []uint32
	wantsAcks bool // ask for stored acknowledgements (DurableSource, a durable StreamFunction)
}

// handshake is the handshake of the next connection attempt.
func (who *identity) handshake(o *Options) Handshake {
	authName, authPayload := o.auth()
	h := Handshake{
		Name:           o.Name,
		ID:             who.id.next(),
		ClientType:     who.typ,
		Observed:       who.observed,
		AuthName:       authName,
		AuthPayload:    authPayload,
		Version:        Version,
		ExtensionLevel: ExtensionLevel,
		WantsAcks:      who.wantsAcks,
	}
	if who.typ == ClientStreamFunction {
		h.WantedTarget = o.WantedTarget
		if o.Filter != "" {
			for _, tag := range who.observed {
				h.Filters = append(h.Filters, Filter{Tag: tag, Text: o.Filter})
			}
		}
	}
	return h
}

// redirect is a connect-to answer: dial endpoint instead.
type redirect struct{ endpoint string }

func (r *redirect) Error() string { return "y3 client: redirected to " + r.endpoint }

// dial connects and handshakes once. A connect-to answer is returned as a *redirect.
func dial(ctx context.Context, addr string, o *Options, who *identity) (*link, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	hello := who.handshake(o)
	wire, err := EncodeFrame(hello, o.MaxFrameLen)
	if err != nil {
		return nil, err
	}
	hctx, cancel := context.WithTimeout(ctx, o.HandshakeTimeout)
	defer cancel()
	s, err := o.Dialer.DialStream(hctx, addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, &Error{Kind: KindTimeout, What: "the connection", Err: err}
		}
		return nil, ioError(err)
	}
	// Cancellation and the handshake timeout interrupt the blocking calls below.
	stop := context.AfterFunc(hctx, func() { _ = s.SetReadDeadline(time.Unix(1, 0)); _ = s.Close() })
	r := NewFrameReader(s, o.MaxFrameLen)
	var answer Frame
	var early []Data
	_, err = s.Write(wire)
	for err == nil {
		var d Data
		answer, err = r.NextData(&d)
		if err != nil || answer != nil {
			break
		}
		if len(early) == maxEarly {
			err = &Error{Kind: KindUnexpectedFrame, Expected: "handshake_ack", Found: "data"}
			break
		}
		early = append(early, ownData(d))
	}
	if !stop() {
		// The context ended first and closed the stream.
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &Error{Kind: KindTimeout, What: "the handshake answer"}
	}
	if err != nil {
		_ = s.Close()
		return nil, readError(err)
	}
	switch f := answer.(type) {
	case HandshakeAck:
		l := &link{
			s:       s,
			r:       r,
			opts:    o,
			id:      hello.ID,
			early:   early,
			out:     make(chan outMsg, o.SendQueue),
			closing: make(chan struct{}),
			dead:    make(chan struct{}),
		}
		go l.writeLoop()
		return l, nil
	case Rejected:
		o.Logger.Warn("router refused the handshake", "code", f.Code, "message", f.Message)
		_ = s.Close()
		return nil, rejectedError(f)
	case Goaway:
		o.Logger.Warn("router refused the handshake", "code", f.Code, "message", f.Message)
		_ = s.Close()
		return nil, goawayError(f)
	case ConnectTo:
		o.Logger.Debug("router redirects", "endpoint", f.Endpoint)
		_ = s.Close()
		return nil, &redirect{endpoint: f.Endpoint}
	default:
		_ = s.Close()
		return nil, &Error{Kind: KindUnexpectedFrame, Expected: "handshake_ack", Found: f.Type().String()}
	}
}

// readError classifies an error of FrameReader.Next on a connection: the clean end of the
// stream is closed, frame errors pass through, the rest is io.
func readError(err error) error {
	if errors.Is(err, io.EOF) {
		return &Error{Kind: KindClosed}
	}
	return ioError(err)
}

// warnEvery is the number of failed connection attempts between two warnings.
const warnEvery = 20

// dialWithBackoff connects, retrying retryable failures up to Backoff.Attempts times
// (forever by default) and following connect-to redirections at once; refusals are
// returned at once. The first failure, and every warnEvery-th after it, is logged at warn
// with the address and the cause.
func dialWithBackoff(ctx context.Context, addr string, o *Options, who *identity) (*link, error) {
	attempts := o.Backoff.Attempts
	target, redirects := addr, 0
	for attempt := 0; ; {
		l, err := dial(ctx, target, o, who)
		if err == nil {
			return l, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var rd *redirect
		if errors.As(err, &rd) {
			if redirects++; redirects > maxRedirects {
				return nil, &Error{Kind: KindUnexpectedFrame, Expected: "handshake_ack", Found: "connect_to"}
			}
			target = rd.endpoint
			continue
		}
		target, redirects = addr, 0
		if !Retryable(err) {
			return nil, err
		}
		attempt++
		if attempts != AttemptsForever && attempt >= attempts {
			o.Logger.Warn("giving up connecting", "addr", addr, "error", err, "attempts", attempts)
			return nil, &Error{Kind: KindGaveUp, Attempts: attempts, Addr: addr, Err: err}
		}
		delay := o.Backoff.Delay(attempt - 1)
		if attempt%warnEvery == 1 {
			o.Logger.Warn("cannot reach the router; retrying (is it running there?)",
				"addr", addr, "error", err, "attempt", attempt, "delay", delay)
		} else {
			o.Logger.Debug("connect failed; retrying", "error", err, "attempt", attempt, "delay", delay)
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// nextData reads the next frame as FrameReader.NextData does, the data frames that came
// before the handshake ack first.
func (l *link) nextData(d *Data) (Frame, error) {
	if len(l.early) > 0 {
		*d = l.early[0]
		l.early = l.early[1:]
		return nil, nil
	}
	return l.r.NextData(d)
}

// writeLoop feeds queued frames into the write buffer and flushes once the queue is empty
// (or maxBatch frames were fed).
func (l *link) writeLoop() {
	w := bufio.NewWriterSize(l.s, writeBuffer)
	var acks []chan error
	write := func(m outMsg) error {
		if m.ack != nil {
			acks = append(acks, m.ack)
			return nil
		}
		_, err := w.Write(*m.frame)
		putFrame(m.frame)
		return err
	}
	err := func() error {
		for {
			var m outMsg
			select {
			case m = <-l.out:
			case <-l.closing:
				// Take what was queued before closing, then end the write side.
				for {
					select {
					case m := <-l.out:
						if err := write(m); err != nil {
							return err
						}
						continue
					default:
					}
					break
				}
				if err := w.Flush(); err != nil {
					return err
				}
				for _, a := range acks {
					a <- nil
				}
				acks = acks[:0]
				return l.s.CloseWrite()
			}
			if err := write(m); err != nil {
				return err
			}
		batch:
			for fed := 1; fed < maxBatch; fed++ {
				select {
				case m = <-l.out:
					if err := write(m); err != nil {
						return err
					}
				default:
					break batch
				}
			}
			if err := w.Flush(); err != nil {
				return err
			}
			for _, a := range acks {
				a <- nil
			}
			acks = acks[:0]
		}
	}()
	if err != nil {
		err = ioError(err)
		l.opts.Logger.Debug("write failed", "error", err)
		_ = l.s.Close() // the connection is broken: wake the reader
	}
	l.werr = err
	for _, a := range acks {
		a <- closedOr(err)
	}
	close(l.dead)
}

func closedOr(err error) error {
	if err != nil {
		return err
	}
	return &Error{Kind: KindClosed}
}

// isClosing reports whether the write side is closing or closed.
func (l *link) isClosing() bool {
	select {
	case <-l.closing:
		return true
	case <-l.dead:
		return true
	default:
		return false
	}
}

// enqueue encodes f and queues it, waiting while the queue is full (until ctx is done or
// abort is closed).
func enqueue[F Frame](ctx context.Context, abort <-chan struct{}, l *link, f F) error {
	b := framePool.Get().(*[]byte)
	enc, err := appendFrame((*b)[:0], f, l.opts.MaxFrameLen)
	if err != nil {
		putFrame(b)
		return err
	}
	*b = enc
	if l.isClosing() {
		putFrame(b)
		return closedOr(l.writerErr())
	}
	select {
	case l.out <- outMsg{frame: b}:
		return nil
	case <-l.dead:
		putFrame(b)
		return closedOr(l.werr)
	case <-l.closing:
		putFrame(b)
		return &Error{Kind: KindClosed}
	case <-abort:
		putFrame(b)
		return &Error{Kind: KindClosed}
	case <-ctx.Done():
		putFrame(b)
		return ctx.Err()
	}
}

func (l *link) writerErr() error {
	select {
	case <-l.dead:
		return l.werr
	default:
		return nil
	}
}

// flush waits until everything queued so far has been written (or ctx is done, or abort
// is closed).
func (l *link) flush(ctx context.Context, abort <-chan struct{}) error {
	ack := make(chan error, 1)
	if l.isClosing() {
		return closedOr(l.writerErr())
	}
	select {
	case l.out <- outMsg{ack: ack}:
	case <-l.dead:
		return closedOr(l.werr)
	case <-abort:
		return &Error{Kind: KindClosed}
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-ack:
		return err
	case <-abort:
		return &Error{Kind: KindClosed}
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closeWrite makes the writer flush what is queued and end the write side.
func (l *link) closeWrite() {
	l.closeWriteOnce.Do(func() { close(l.closing) })
}

// waitWriter waits for the writer to stop (at most d) and returns its error.
func (l *link) waitWriter(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.dead:
		return l.werr
	case <-t.C:
		return &Error{Kind: KindTimeout, What: "the writer to flush"}
	}
}

// close releases the stream at once.
func (l *link) close() {
	l.closeOnce.Do(func() { _ = l.s.Close() })
}

// finish ends a link gracefully from its reader's goroutine: flush and end the write side,
// read (and drop) until the router closes or linger passes, then release the stream.
func (l *link) finish(linger time.Duration) error {
	l.closeWrite()
	err := l.waitWriter(linger)
	_ = l.s.SetReadDeadline(time.Now().Add(linger))
	var d Data
	for {
		if _, rerr := l.nextData(&d); rerr != nil {
			break
		}
	}
	l.close()
	if KindOf(err) == KindClosed {
		return nil
	}
	return err
}
