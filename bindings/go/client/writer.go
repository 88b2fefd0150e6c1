package client

import (
	"context"
	"maps"
)

// WriterHandler is a stream function's work on one data frame, with a Writer for its
// outputs: it may write any number of them, to any tag, and address them to a target, as
// YoMo's ctx.Write and ctx.WriteWithTarget do. in.Payload, in.Metadata and in.RawMetadata
// are the handler's to keep. Returning an error stops the function: ServeWriter closes the
// connection gracefully and returns that error. A failed write need not end the handler
// with an error: the function reconnects by itself when its connection is lost.
type WriterHandler func(ctx context.Context, in Data, w *Writer) error

// Writer writes a stream function's outputs for one input. Every output keeps the input's
// metadata (yomo-source-id, yomo-tid, custom keys) minus yomo-target, with one more hop,
// as YoMo v1.22's serverless context does; WriteWithTarget adds yomo-target.
//
// Writes are backpressured: each waits for room in the connection's send queue
// (Options.SendQueue), never buffering without bound. nil means the output is queued on
// the connection (for a durable function: kept until the router stored it, written again
// after a reconnect). A write after the input's connection is gone, or after the function
// stopped, returns an error of kind closed and writes nothing.
//
// A Writer may be kept and used from other goroutines after the handler returned, while
// the function serves. One deliberate difference from YoMo: YoMo's WriteWithTarget leaves
// the target in the context, so the handler's later Writes carry it too; here each write
// carries only its own.
type Writer struct {
	f   *StreamFunction
	l   *link // the connection the input came on
	in  Data
	ctx context.Context
}

// Write writes payload under tag with the input's metadata (YoMo's ctx.Write).
//
// Errors: closed once the connection is gone or the function stopped; too_long for an
// output over Options.MaxFrameLen; ctx's error once Serve's ctx is done and the queue is
// full.
func (w *Writer) Write(tag uint32, payload []byte) error {
	return w.send(output(&w.in, tag, payload))
}

// WriteWithTarget writes payload under tag with the input's metadata and yomo-target =
// target (YoMo's ctx.WriteWithTarget): only the stream functions wanting target receive
// it. An empty target writes as Write does.
//
// Errors: as Write.
func (w *Writer) WriteWithTarget(tag uint32, payload []byte, target string) error {
	d := output(&w.in, tag, payload)
	if target != "" {
		md := maps.Clone(d.Metadata)
		if md == nil {
			md = map[string]string{}
		}
		md[MetaTarget] = target
		d.Metadata, d.RawMetadata = md, nil
	}
	return w.send(d)
}

func (w *Writer) send(d Data) error {
	if w.f.durable() {
		return w.f.keep(w.ctx, d)
	}
	w.f.mu.Lock()
	closed := w.f.closed
	w.f.mu.Unlock()
	if closed {
		return &Error{Kind: KindClosed}
	}
	return enqueue(w.ctx, nil, w.l, d)
}

// adapt serves a one-output Handler as a WriterHandler: its output, if any, is written
// with the input's metadata. A write that fails is logged; the read that follows notices
// a lost connection.
func adapt(h Handler, o *Options) WriterHandler {
	return func(ctx context.Context, in Data, w *Writer) error {
		tag, out, ok, err := h(ctx, in)
		if err != nil || !ok {
			return err
		}
		if werr := w.Write(tag, out); werr != nil {
			if KindOf(werr) == KindTooLong {
				o.Logger.Warn("output dropped", "error", werr)
			} else {
				o.Logger.Debug("output not written", "error", werr)
			}
		}
		return nil
	}
}
