package peer

import (
	"context"
	"time"

	"github.com/yomorun/yomo"
)

// Source is a connected yomo.NewSource.
type Source struct {
	client yomo.Source
	cc     ClientConfig
	errs   errorLog
}

// ConnectSource creates a YoMo source and connects it to cc.Addr within cc's connect bound.
// A rejected handshake (wrong token) returns YoMo's *core.ErrRejected.
func ConnectSource(cc ClientConfig) (*Source, error) {
	s := &Source{cc: cc}
	s.client = yomo.NewSource(cc.name("yomo-peer-source"), cc.Addr, cc.sourceOptions()...)
	s.client.SetErrorHandler(s.errs.record)
	if err := connectWithin(cc, s.client.Connect, s.client.Close, &s.errs); err != nil {
		return nil, err
	}
	return s, nil
}

// Write sends payload under tag; with a non-empty target only stream functions whose wanted
// target equals it receive the frame (YoMo's WriteWithTarget). It blocks while YoMo
// reconnects, and returns an error once the zipper closed the connection for good.
func (s *Source) Write(tag uint32, payload []byte, target string) error {
	if target != "" {
		return s.client.WriteWithTarget(tag, payload, target)
	}
	return s.client.Write(tag, payload)
}

// WriteStamped sends a fresh payload of size bytes stamped with seq and the current time.
func (s *Source) WriteStamped(tag uint32, seq uint64, size int, target string) error {
	return s.Write(tag, Stamp(seq, time.Now(), size), target)
}

// LastError is the last error YoMo reported through the source's error handler, or nil.
func (s *Source) LastError() error { return s.errs.Last() }

// RemoteClose is the error with which the zipper closed this source for good, or nil.
func (s *Source) RemoteClose() error { return s.errs.RemoteClose() }

// Close closes the source within cc's close bound. After the zipper closed the connection
// for good there is nothing left to close, and YoMo's Close would never return: then it
// returns at once.
func (s *Source) Close() error {
	if s.RemoteClose() != nil {
		return nil
	}
	return within(s.cc.closeTimeout(), "close source", s.client.Close)
}

// SourceRun is what [RunSource] sends.
type SourceRun struct {
	ClientConfig
	// Tag is the data tag of every frame.
	Tag uint32
	// Count is the number of messages.
	Count int
	// Size is the payload size in bytes (at least [StampLen]).
	Size int
	// Rate paces the messages, in messages per second; 0 sends as fast as Write returns.
	Rate float64
	// Target, when not empty, is the wanted target of every frame (WriteWithTarget).
	Target string
	// SeqStart is the first sequence number; messages are numbered SeqStart, SeqStart+1, ...
	SeqStart uint64
	// Linger is how long to wait after the last Write before closing: YoMo's Write returns
	// before the frame is on the wire, and closing the QUIC connection drops what is unsent.
	Linger time.Duration
}

// SourceReport is the JSON summary of `yomo-peer source`.
type SourceReport struct {
	// Sent is the number of Writes that returned no error.
	Sent int `json:"sent"`
	// Errors is the number of Writes that returned an error.
	Errors int `json:"errors"`
	// Seconds is the time from the first Write to the return of the last one.
	Seconds float64 `json:"seconds"`
	// MsgPerS is Sent / Seconds.
	MsgPerS float64 `json:"msg_per_s"`
	// Error is the first error: the connect failure (e.g. a rejected token) or a Write error.
	Error string `json:"error,omitempty"`
}

// RunSource connects a source, writes run.Count stamped messages, lingers and closes. It stops
// early when ctx ends. The report's Error is set when anything failed.
func RunSource(ctx context.Context, run SourceRun) SourceReport {
	var rep SourceReport
	src, err := ConnectSource(run.ClientConfig)
	if err != nil {
		rep.Error = err.Error()
		return rep
	}
	start := time.Now()
	for i := 0; i < run.Count && ctx.Err() == nil; i++ {
		if run.Rate > 0 {
			due := start.Add(time.Duration(float64(i) / run.Rate * float64(time.Second)))
			if wait := time.Until(due); wait > 0 {
				select {
				case <-time.After(wait):
				case <-ctx.Done():
				}
			}
		}
		if err := src.WriteStamped(run.Tag, run.SeqStart+uint64(i), run.Size, run.Target); err != nil {
			rep.Errors++
			if rep.Error == "" {
				rep.Error = err.Error()
			}
			continue
		}
		rep.Sent++
	}
	rep.Seconds = time.Since(start).Seconds()
	if rep.Seconds > 0 {
		rep.MsgPerS = float64(rep.Sent) / rep.Seconds
	}
	if run.Linger > 0 {
		select {
		case <-time.After(run.Linger):
		case <-ctx.Done():
		}
	}
	// A close that times out (the zipper closed us, YoMo's Close hangs) adds nothing the
	// Write errors have not already said.
	_ = src.Close()
	return rep
}
