package client

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"
)

// Handler is a stream function's work on one data frame. in.Payload and in.Metadata are
// the handler's to keep. Returning ok sends out under outTag; the output keeps the
// input's id and metadata, with one more hop. Returning an error stops the function: Serve
// closes the connection gracefully and returns that error.
type Handler func(ctx context.Context, in Data) (outTag uint32, out []byte, ok bool, err error)

// StreamFunction observes tags and answers some frames with a result frame. The router
// routes each output onward to the output tag's observers, never back to this function.
type StreamFunction struct {
	addr     string
	opts     Options
	observed []uint32

	mu      sync.Mutex
	l       *link
	session uint64
	serving bool
	closed  bool
}

// ConnectStreamFunction connects (with backoff) and handshakes as a stream function
// observing observed. ctx bounds the connecting only. Serve then runs the handler.
//
// Errors: as ConnectSource; bad_handshake when observed is empty.
func ConnectStreamFunction(ctx context.Context, addr string, opts Options, observed []uint32) (*StreamFunction, error) {
	f := &StreamFunction{addr: addr, opts: opts.norm(), observed: append([]uint32(nil), observed...)}
	l, err := dialWithBackoff(ctx, addr, &f.opts, RoleStreamFunction, f.observed)
	if err != nil {
		return nil, err
	}
	f.l, f.session = l, l.session
	return f, nil
}

// RunStreamFunction connects and serves h until ctx is done: ConnectStreamFunction, then
// Serve.
func RunStreamFunction(ctx context.Context, addr string, opts Options, observed []uint32, h Handler) error {
	f, err := ConnectStreamFunction(ctx, addr, opts, observed)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	return f.Serve(ctx, h)
}

// Session is the router's id for the current connection.
func (f *StreamFunction) Session() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.session
}

// Serve runs h on every data frame, in arrival order, reconnecting (with Options.Backoff)
// when the connection is lost. It returns nil when ctx is done (after flushing the
// outputs produced so far and closing the connection gracefully), h's error, or the error
// that ended reconnecting (gave_up, a refusal). Serve may be called once.
func (f *StreamFunction) Serve(ctx context.Context, h Handler) error {
	f.mu.Lock()
	if f.serving || f.closed {
		f.mu.Unlock()
		return &Error{Kind: KindClosed}
	}
	f.serving = true
	l := f.l
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.closed = true
		f.l = nil
		f.mu.Unlock()
	}()
	for {
		broken, err := f.serveLink(ctx, l, h)
		if !broken {
			return err
		}
		l.closeWrite()
		l.close()
		nl, err := dialWithBackoff(ctx, f.addr, &f.opts, RoleStreamFunction, f.observed)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		f.mu.Lock()
		f.l, f.session = nl, nl.session
		f.mu.Unlock()
		l = nl
	}
}

// serveLink serves one connection. broken: the connection was lost (reconnect).
func (f *StreamFunction) serveLink(ctx context.Context, l *link, h Handler) (broken bool, err error) {
	// On cancellation: flush the outputs, end the write side; the router then closes and
	// the read below ends. The deadline bounds the wait.
	stopped := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		close(stopped)
		l.closeWrite()
		_ = l.s.SetReadDeadline(time.Now().Add(f.opts.Linger))
	})
	defer stop()
	var d Data
	for {
		fr, rerr := l.r.NextData(&d)
		select {
		case <-stopped:
			if rerr == nil {
				continue // discard what arrives while closing
			}
			_ = l.waitWriter(f.opts.Linger)
			l.close()
			return false, nil
		default:
		}
		if rerr != nil {
			f.opts.Logger.Debug("function connection ended", "error", rerr)
			return true, rerr
		}
		if fr == nil {
			in := ownData(d)
			tag, out, ok, herr := h(ctx, in)
			if herr != nil {
				l.finish(f.opts.Linger)
				return false, herr
			}
			if !ok {
				continue
			}
			hops := in.Hops
			if hops < math.MaxUint32 {
				hops++
			}
			if out == nil {
				out = []byte{}
			}
			res := Data{Tag: tag, ID: in.ID, Hops: hops, Metadata: in.Metadata, Payload: out}
			if eerr := enqueue(ctx, nil, l, res); eerr != nil {
				if ctx.Err() != nil {
					continue // stopping: the read above ends soon
				}
				if KindOf(eerr) == KindTooLong {
					f.opts.Logger.Warn("output dropped", "error", eerr)
					continue
				}
				return true, eerr
			}
			continue
		}
		switch fr := fr.(type) {
		case Ping:
			l.tryEnqueue(Pong(fr))
		case Goaway:
			f.opts.Logger.Debug("function got goaway", "code", fr.Code.Kind(), "reason", fr.Reason)
			if f.opts.OnGoaway != nil {
				f.opts.OnGoaway(fr)
			}
			// Keep reading: the router delivers what it holds, then closes.
		}
	}
}

// ownData copies a frame's payload and metadata out of the read buffer (one allocation).
func ownData(d Data) Data {
	buf := make([]byte, len(d.Payload)+len(d.Metadata))
	n := copy(buf, d.Payload)
	payload := buf[:n:n]
	if d.Metadata != nil {
		m := buf[n:]
		copy(m, d.Metadata)
		d.Metadata = m
	}
	d.Payload = payload
	return d
}

// Close closes a function that is not serving (Serve closes by itself when its ctx is
// done).
func (f *StreamFunction) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.serving {
		return nil
	}
	f.closed = true
	if f.l == nil {
		return nil
	}
	l := f.l
	f.l = nil
	err := closeLink(l, drainReader(l), f.opts.Linger)
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

// drainReader reads and discards frames until the connection ends, for a link whose
// reader is not running.
func drainReader(l *link) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		var d Data
		for {
			if _, err := l.r.NextData(&d); err != nil {
				return
			}
		}
	}()
	return done
}
