package client

import (
	"context"
	"errors"
	"maps"
	"math"
	"sync"
	"time"
)

// Handler is a stream function's work on one data frame, with at most one output.
// in.Payload, in.Metadata and in.RawMetadata are the handler's to keep. Returning ok writes
// out under outTag; the output keeps the input's metadata (yomo-source-id, yomo-tid, ...)
// minus yomo-target, with one more hop, as YoMo's ctx.Write does. Returning an error stops
// the function: Serve closes the connection gracefully and returns that error. For any
// number of outputs per input, or a targeted one, see WriterHandler.
type Handler func(ctx context.Context, in Data) (outTag uint32, out []byte, ok bool, err error)

// StreamFunction observes tags and answers some frames with a result frame (client type
// 0x5d). The router delivers every frame of an observed tag to every function observing
// it, this one's own outputs included when it observes their tag.
//
// A durable function (ConnectDurableStreamFunction) keeps its outputs until the router has
// stored them and writes again what a lost connection left unstored; a plain one's outputs
// are at most once.
type StreamFunction struct {
	addr string
	opts Options
	who  identity

	mu      sync.Mutex
	l       *link
	serving bool
	closed  bool

	// A durable function's outputs kept until stored (a plain one's stays empty). Writers
	// keep and write them, Serve's goroutine acknowledges them; wmu lets Unacked, Resent
	// and the stop read. kmu orders the writers' keeping and writing with the resending
	// after a reconnect, so that the window's counts follow what each connection carried.
	wmu sync.Mutex
	win window
	kmu sync.Mutex
}

// ConnectStreamFunction connects (with backoff) and handshakes as a stream function
// observing observed (and wanting Options.WantedTarget, if set). ctx bounds the connecting
// only. Serve then runs the handler.
//
// Errors: as ConnectSource.
func ConnectStreamFunction(ctx context.Context, addr string, opts Options, observed []uint32) (*StreamFunction, error) {
	return connectFunction(ctx, addr, opts, observed, false)
}

// connectFunction connects a function, durable (asking for stored acknowledgements) or not.
func connectFunction(ctx context.Context, addr string, opts Options, observed []uint32, durable bool) (*StreamFunction, error) {
	f := &StreamFunction{addr: addr, opts: opts.norm()}
	f.who = identity{id: newClientID(), typ: ClientStreamFunction, observed: append([]uint32(nil), observed...),
		wantsAcks: durable}
	l, err := dialWithBackoff(ctx, addr, &f.opts, &f.who)
	if err != nil {
		return nil, err
	}
	f.l = l
	return f, nil
}

// ConnectDurableStreamFunction is ConnectStreamFunction for a durable function, the Rust
// SDK's StreamFunction::durable: it asks the router for stored acknowledgements of its
// outputs (handshake field 32, spec/frames.md "Stored acknowledgements"), keeps every
// output until the router says it is stored (routed, and for a durable tag of the
// federation, in JetStream), and after a reconnect writes again, in order, the outputs
// that were not stored, with their input's metadata and hops (the same yomo-tid, which the
// federation's durable tags de-duplicate). Outputs are then at least once across a router
// killed mid-stream; give the function durable input and output tags and a stable
// Options.Name, so that the restarted router's durable consumer delivers again the inputs
// that had not reached it.
//
// Only for routers that know the extension (y3 serve): YoMo's zipper never acknowledges,
// and the outputs would pile up. The outputs kept are bounded by what the router holds
// unstored: a router reads an acknowledging client only as fast as it stores. When Serve's
// ctx is done, it waits (at most Options.Linger) for the outputs kept to be stored before
// closing.
//
// Errors: as ConnectSource.
func ConnectDurableStreamFunction(ctx context.Context, addr string, opts Options, observed []uint32) (*StreamFunction, error) {
	return connectFunction(ctx, addr, opts, observed, true)
}

// RunStreamFunction connects and serves h until ctx is done: ConnectStreamFunction, then
// Serve.
func RunStreamFunction(ctx context.Context, addr string, opts Options, observed []uint32, h Handler) error {
	return runFunction(ctx, addr, opts, observed, false, func(f *StreamFunction) error { return f.Serve(ctx, h) })
}

// RunDurableStreamFunction is RunStreamFunction for a durable function:
// ConnectDurableStreamFunction, then Serve.
func RunDurableStreamFunction(ctx context.Context, addr string, opts Options, observed []uint32, h Handler) error {
	return runFunction(ctx, addr, opts, observed, true, func(f *StreamFunction) error { return f.Serve(ctx, h) })
}

// RunStreamFunctionWriter connects and serves h until ctx is done: ConnectStreamFunction,
// then ServeWriter.
func RunStreamFunctionWriter(ctx context.Context, addr string, opts Options, observed []uint32, h WriterHandler) error {
	return runFunction(ctx, addr, opts, observed, false, func(f *StreamFunction) error { return f.ServeWriter(ctx, h) })
}

// RunDurableStreamFunctionWriter is RunStreamFunctionWriter for a durable function:
// ConnectDurableStreamFunction, then ServeWriter.
func RunDurableStreamFunctionWriter(ctx context.Context, addr string, opts Options, observed []uint32, h WriterHandler) error {
	return runFunction(ctx, addr, opts, observed, true, func(f *StreamFunction) error { return f.ServeWriter(ctx, h) })
}

// runFunction connects a function and serves it; nil when connecting ended with ctx.
func runFunction(ctx context.Context, addr string, opts Options, observed []uint32, durable bool, serve func(*StreamFunction) error) error {
	f, err := connectFunction(ctx, addr, opts, observed, durable)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	return serve(f)
}

// durable reports whether the function keeps its outputs until stored.
func (f *StreamFunction) durable() bool { return f.who.wantsAcks }

// Unacked is how many outputs a durable function keeps, written or not, and not yet
// stored (0 for a plain function).
func (f *StreamFunction) Unacked() int {
	n, _ := counts(&f.wmu, &f.win)
	return n
}

// Resent is how many outputs a durable function wrote again on a new connection so far
// (0 for a plain function).
func (f *StreamFunction) Resent() uint64 {
	_, n := counts(&f.wmu, &f.win)
	return n
}

// Refused is how many outputs of a durable function the router refused so far (over its
// frame limit, past its hop limit, a loop): delivered to no one, not written again, the
// first of each reason logged (0 for a plain function).
func (f *StreamFunction) Refused() uint64 {
	n, _ := refusedCounts(&f.wmu, &f.win)
	return n
}

// Retried is how many times the router answered an output of a durable function
// no_subscriber (nobody took it) or not_stored (JetStream did not store it) so far: each
// time it was kept and written again after a backoff (0 for a plain function).
func (f *StreamFunction) Retried() uint64 { return retriedCount(&f.wmu, &f.win) }

// Refusals lists the first MaxRefusalsKept refused outputs, with each one's reason.
func (f *StreamFunction) Refusals() []Refused {
	_, kept := refusedCounts(&f.wmu, &f.win)
	return kept
}

// ID is the function's client id without its reconnect suffix.
func (f *StreamFunction) ID() string { return f.who.id.base }

// Serve runs h on every data frame, in arrival order, reconnecting (with Options.Backoff)
// when the connection is lost; a durable function then writes its unstored outputs again
// first. It returns nil when ctx is done (after flushing the outputs produced so far, for
// a durable function waiting at most Options.Linger for them to be stored, and closing the
// connection gracefully), h's error, the refusal that ended the connection when it is not
// retryable (a rejected frame, a goaway or QUIC close whose code says so), or the error
// that ended reconnecting (gave_up, a refusal). Serve (or ServeWriter) may be called once.
func (f *StreamFunction) Serve(ctx context.Context, h Handler) error {
	return f.ServeWriter(ctx, adapt(h, &f.opts))
}

// ServeWriter is Serve for a WriterHandler: h gets a Writer for each input and may write
// any number of outputs, to any tag, optionally to a target. Handlers run one at a time, in
// arrival order. Once ServeWriter returned, every Writer's writes fail (kind closed).
func (f *StreamFunction) ServeWriter(ctx context.Context, h WriterHandler) error {
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
		if f.l != nil {
			// Writers kept past the handler are refused from now on.
			f.l.closeWrite()
		}
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
		nl, err := dialWithBackoff(ctx, f.addr, &f.opts, &f.who)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		l = nl
		if !f.durable() {
			f.mu.Lock()
			f.l = nl
			f.mu.Unlock()
			continue
		}
		f.kmu.Lock()
		f.mu.Lock()
		f.l = nl
		f.mu.Unlock()
		f.wmu.Lock()
		f.win.reconnected()
		unstored := f.win.len()
		f.wmu.Unlock()
		// A failure here is noticed by the next read; the window keeps the outputs.
		_ = writeKept(ctx, nil, l, &f.wmu, &f.win)
		f.kmu.Unlock()
		f.opts.Logger.Debug("function reconnected", "resending", unstored)
	}
}

// keep keeps a durable function's output and writes it, with the others unwritten, on the
// current connection. nil: kept (written again after a reconnect if this connection ends
// first). With the connection gone, an output is kept for the next one up to
// Options.SendQueue unwritten outputs, then refused (closed); once the function stopped,
// always refused.
func (f *StreamFunction) keep(ctx context.Context, out Data) error {
	if body := out.bodyLen(); body > frameLimit(f.opts.MaxFrameLen) {
		return &Error{Kind: KindTooLong, Declared: uint64(body), Limit: uint64(frameLimit(f.opts.MaxFrameLen))}
	}
	f.kmu.Lock()
	defer f.kmu.Unlock()
	f.mu.Lock()
	l, closed := f.l, f.closed
	f.mu.Unlock()
	if closed || l == nil {
		return &Error{Kind: KindClosed}
	}
	f.wmu.Lock()
	if l.isClosing() && f.win.len()-f.win.written >= f.opts.SendQueue {
		f.wmu.Unlock()
		return &Error{Kind: KindClosed}
	}
	f.win.keep(out)
	f.wmu.Unlock()
	if err := writeKept(ctx, nil, l, &f.wmu, &f.win); err != nil && ctx.Err() != nil {
		// Stopping: write the rest while the stop lingers for the stored counts.
		wctx, cancel := context.WithTimeout(context.Background(), f.opts.Linger)
		defer cancel()
		if writeKept(wctx, nil, l, &f.wmu, &f.win) != nil {
			// No connection will carry it (the stop logs what stayed unstored).
			return &Error{Kind: KindClosed}
		}
	}
	return nil
}

// ack applies the router's stored count; once stopping, the write side ends when every
// output is stored.
func (f *StreamFunction) ack(l *link, st Stored, stopped <-chan struct{}) {
	f.wmu.Lock()
	f.win.ack(st, f.opts.Logger)
	empty := f.win.len() == 0
	due := f.win.nextDue()
	f.wmu.Unlock()
	if !due.IsZero() {
		// Outputs nobody took (no_subscriber) are written again once due, on this link.
		time.AfterFunc(time.Until(due), func() {
			f.kmu.Lock()
			defer f.kmu.Unlock()
			f.mu.Lock()
			cur, closed := f.l, f.closed
			f.mu.Unlock()
			if cur == nil || closed {
				return
			}
			_ = writeKept(context.Background(), stopped, cur, &f.wmu, &f.win)
		})
	}
	select {
	case <-stopped:
		if empty {
			l.closeWrite()
		}
	default:
	}
}

// output is the frame a function writes for in: in's metadata minus yomo-target (in's
// bytes as they are when it has none), one more hop.
func output(in *Data, tag uint32, out []byte) Data {
	hops := in.Hops
	if hops < math.MaxUint32 {
		hops++
	}
	if out == nil {
		out = []byte{}
	}
	d := Data{Tag: tag, Payload: out, Hops: hops}
	if _, ok := in.Metadata[MetaTarget]; ok {
		d.Metadata = maps.Clone(in.Metadata)
		delete(d.Metadata, MetaTarget)
	} else {
		d.Metadata, d.RawMetadata = in.Metadata, in.RawMetadata
		if d.RawMetadata == nil {
			d.RawMetadata = []byte{}
		}
	}
	return d
}

// serveLink serves one connection. broken: the connection was lost (reconnect).
func (f *StreamFunction) serveLink(ctx context.Context, l *link, h WriterHandler) (broken bool, err error) {
	// On cancellation: flush the outputs, end the write side (a durable function once its
	// outputs are stored, see ack); the router then closes and the read below ends. The
	// deadline bounds the wait. The stopped check and ack's are ordered by wmu.
	stopped := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		f.wmu.Lock()
		close(stopped)
		empty := f.win.len() == 0
		f.wmu.Unlock()
		if empty {
			l.closeWrite()
		}
		_ = l.s.SetReadDeadline(time.Now().Add(f.opts.Linger))
	})
	defer stop()
	var d Data
	for {
		fr, rerr := l.nextData(&d)
		select {
		case <-stopped:
			if rerr == nil {
				if st, ok := fr.(Stored); ok {
					f.ack(l, st, stopped)
				}
				continue // discard the data that arrives while closing
			}
			_ = l.waitWriter(f.opts.Linger)
			l.close()
			if n := f.Unacked(); n > 0 {
				f.opts.Logger.Warn("function stopped with outputs not stored", "unstored", n)
			}
			return false, nil
		default:
		}
		if rerr != nil {
			f.opts.Logger.Debug("function connection ended", "error", rerr)
			if isRefusal(rerr) {
				l.close()
				return false, rerr
			}
			return true, rerr
		}
		if fr == nil {
			in := ownData(d)
			if herr := h(ctx, in, &Writer{f: f, l: l, in: in, ctx: ctx}); herr != nil {
				_ = l.finish(f.opts.Linger)
				return false, herr
			}
			continue
		}
		if st, ok := fr.(Stored); ok {
			f.ack(l, st, stopped)
			continue
		}
		if err := refusal(fr, &f.opts); err != nil {
			_ = l.finish(f.opts.Linger)
			return false, err
		}
	}
}

// refusal handles a frame other than data on an established connection: a goaway is
// reported to OnGoaway, and is the end of the client when its code is not retryable (a
// retryable one is followed by the router's close, then reconnection); a rejected frame
// is always the end. Other frames are ignored.
func refusal(fr Frame, o *Options) error {
	switch fr := fr.(type) {
	case Goaway:
		o.Logger.Debug("goaway", "code", fr.Code, "message", fr.Message)
		if o.OnGoaway != nil {
			o.OnGoaway(fr)
		}
		if e := goawayError(fr); !e.Retryable() {
			return e
		}
		// Keep reading: the router delivers what it holds, then closes.
	case Rejected:
		o.Logger.Warn("rejected", "code", fr.Code, "message", fr.Message)
		return rejectedError(fr)
	}
	return nil
}

// ownData copies a frame's payload and metadata out of the read buffer (one allocation
// for the bytes, and the metadata map). The metadata was checked when the frame was read.
func ownData(d Data) Data {
	buf := make([]byte, len(d.Payload)+len(d.RawMetadata))
	n := copy(buf, d.Payload)
	payload := buf[:n:n]
	if d.RawMetadata != nil {
		m := buf[n:]
		copy(m, d.RawMetadata)
		d.RawMetadata = m
	}
	if d.Metadata == nil {
		d.Metadata, _ = DecodeMetadata(d.RawMetadata)
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
			if _, err := l.nextData(&d); err != nil {
				return
			}
		}
	}()
	return done
}
