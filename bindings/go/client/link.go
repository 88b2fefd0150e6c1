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
	s       Stream
	r       *FrameReader // read by exactly one goroutine, the client's
	opts    *Options
	session uint64

	out     chan outMsg
	closing chan struct{} // closed by closeWrite: drain, flush, CloseWrite, stop
	dead    chan struct{} // closed when the writer has stopped
	werr    error         // the writer's error, valid once dead is closed

	closeWriteOnce sync.Once
	closeOnce      sync.Once
}

// dial connects and handshakes once.
func dial(ctx context.Context, addr string, o *Options, role Role, observed []uint32) (*link, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	hello := Handshake{Version: Version, Role: role, Name: o.Name, Token: o.Token, Observed: observed}
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
	_, err = s.Write(wire)
	if err == nil {
		answer, err = r.Next()
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
	case Accepted:
		l := &link{
			s:       s,
			r:       r,
			opts:    o,
			session: f.Session,
			out:     make(chan outMsg, o.SendQueue),
			closing: make(chan struct{}),
			dead:    make(chan struct{}),
		}
		go l.writeLoop()
		return l, nil
	case Goaway:
		o.Logger.Warn("router refused the handshake", "code", f.Code.Kind(), "reason", f.Reason)
		_ = s.Close()
		return nil, goawayError(f)
	default:
		_ = s.Close()
		return nil, &Error{Kind: KindUnexpectedFrame, Expected: "accepted", Found: f.Type().String()}
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

// dialWithBackoff connects, retrying retryable failures up to Backoff.Attempts times;
// refusals are returned at once.
func dialWithBackoff(ctx context.Context, addr string, o *Options, role Role, observed []uint32) (*link, error) {
	attempts := o.Backoff.Attempts
	for attempt := 0; ; {
		l, err := dial(ctx, addr, o, role, observed)
		if err == nil {
			return l, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !Retryable(err) {
			return nil, err
		}
		attempt++
		if attempt >= attempts {
			o.Logger.Warn("giving up connecting", "error", err, "attempts", attempts)
			return nil, &Error{Kind: KindGaveUp, Attempts: attempts, Err: err}
		}
		delay := o.Backoff.Delay(attempt - 1)
		o.Logger.Debug("connect failed; retrying", "error", err, "attempt", attempt, "delay", delay)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
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

// tryEnqueue queues a control frame if there is room (a pong must not block the reader).
func (l *link) tryEnqueue(f Pong) {
	if l.isClosing() {
		return
	}
	b := framePool.Get().(*[]byte)
	enc, err := appendFrame((*b)[:0], f, l.opts.MaxFrameLen)
	if err != nil {
		putFrame(b)
		return
	}
	*b = enc
	select {
	case l.out <- outMsg{frame: b}:
	default:
		putFrame(b)
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
		if _, rerr := l.r.NextData(&d); rerr != nil {
			break
		}
	}
	l.close()
	if KindOf(err) == KindClosed {
		return nil
	}
	return err
}
