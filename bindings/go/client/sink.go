package client

import (
	"context"
	"sync"
	"time"
)

// SinkBuffer is the number of frames buffered between the sink's reader goroutine and the
// application. When the application stops receiving, the reader stops reading, the socket
// fills, and the router applies its queue policy to this subscriber.
const SinkBuffer = 1024

// Sink receives the data frames routed to the tags it observes, on a channel. To the
// router it is a stream function (client type 0x5d) that never writes.
//
// A reader goroutine reads the connection and reconnects (with Options.Backoff) when it is
// lost; frames routed while it is down are not delivered to it. When reconnecting gives up,
// or the router refuses the client for good, the channel is closed and Err returns why.
type Sink struct {
	ch      chan Data
	cancel  context.CancelFunc
	done    chan struct{} // closed when err is final, before ch is closed
	stopped chan struct{} // closed after ch
	err     error
	who     identity

	closeOnce sync.Once
}

// ConnectSink connects (with backoff) and handshakes as a sink observing observed (and
// wanting Options.WantedTarget, if set). ctx bounds the connecting only; Close stops the
// sink.
//
// Errors: as ConnectSource.
func ConnectSink(ctx context.Context, addr string, opts Options, observed []uint32) (*Sink, error) {
	o := opts.norm()
	s := &Sink{ch: make(chan Data, SinkBuffer), done: make(chan struct{}), stopped: make(chan struct{})}
	s.who = identity{id: newClientID(), typ: ClientStreamFunction, observed: append([]uint32(nil), observed...)}
	l, err := dialWithBackoff(ctx, addr, &o, &s.who)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.run(runCtx, addr, &o, l)
	return s, nil
}

// ID is the sink's client id without its reconnect suffix.
func (s *Sink) ID() string { return s.who.id.base }

// C is the channel of received frames (each frame's payload is its own). It is closed
// when the sink stops: after Close, or when reconnecting failed (see Err).
func (s *Sink) C() <-chan Data { return s.ch }

// Recv returns the next frame, waiting for it.
//
// Errors: ctx.Err(); once the channel is closed, Err() (gave_up, a refusal) or closed.
func (s *Sink) Recv(ctx context.Context) (Data, error) {
	select {
	case d, ok := <-s.ch:
		if ok {
			return d, nil
		}
	case <-ctx.Done():
		return Data{}, ctx.Err()
	}
	if err := s.Err(); err != nil {
		return Data{}, err
	}
	return Data{}, &Error{Kind: KindClosed}
}

// Err is why the sink stopped on its own (nil while it runs and after Close).
func (s *Sink) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Close stops receiving, closes the connection gracefully (at most Options.Linger) and
// closes the channel. Frames still buffered in the channel can be drained after it.
func (s *Sink) Close() error {
	s.closeOnce.Do(s.cancel)
	<-s.stopped
	return nil
}

func (s *Sink) run(ctx context.Context, addr string, o *Options, l *link) {
	// done (which publishes err) before the channel: a receiver that sees the channel
	// closed then reads the final error.
	defer close(s.stopped)
	defer close(s.ch)
	defer close(s.done)
	for {
		reconnect, err := s.pump(ctx, o, l)
		if !reconnect {
			s.err = err
			return // closed by Close, or refused
		}
		l.closeWrite()
		l.close()
		l, err = dialWithBackoff(ctx, addr, o, &s.who)
		if err != nil {
			if ctx.Err() == nil {
				s.err = err
			}
			return
		}
	}
}

// pump forwards data frames until the connection ends (true: reconnect), ctx is done
// (false, nil: the link was closed gracefully) or the router refuses the sink for good
// (false and the refusal).
func (s *Sink) pump(ctx context.Context, o *Options, l *link) (bool, error) {
	stop := context.AfterFunc(ctx, func() {
		l.closeWrite()
		_ = l.s.SetReadDeadline(time.Now().Add(o.Linger))
	})
	defer stop()
	var d Data
	for {
		f, err := l.nextData(&d)
		if ctx.Err() != nil {
			_ = l.finish(o.Linger)
			return false, nil
		}
		if err != nil {
			if isRefusal(err) {
				o.Logger.Debug("sink refused", "error", err)
				l.close()
				return false, err
			}
			o.Logger.Debug("sink connection ended; reconnecting", "error", err)
			return true, nil
		}
		if f == nil {
			select {
			case s.ch <- ownData(d):
			case <-ctx.Done():
				_ = l.finish(o.Linger)
				return false, nil
			}
			continue
		}
		if err := refusal(f, o); err != nil {
			_ = l.finish(o.Linger)
			return false, err
		}
	}
}
