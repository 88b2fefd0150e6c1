package peer

import (
	"time"

	"github.com/yomorun/yomo/serverless"
)

// Sink is a YoMo stream function that never writes: it counts what it receives in a
// [Tracker].
type Sink struct {
	fn *function
	// Tracker holds everything received so far.
	Tracker *Tracker
}

// ConnectSink creates and connects a sink. Once it returns, the zipper routes the observed
// tags to it (YoMo adds the route before acknowledging the handshake).
func ConnectSink(cfg FunctionConfig) (*Sink, error) {
	s := &Sink{Tracker: NewTracker()}
	fn, err := connectFunction(cfg, "yomo-peer-sink", func(ctx serverless.Context) {
		tid, sourceID := metadataOf(ctx)
		s.Tracker.Observe(Frame{
			Tag:      ctx.Tag(),
			Payload:  ctx.Data(),
			TID:      tid,
			SourceID: sourceID,
			At:       time.Now(),
		})
	})
	if err != nil {
		return nil, err
	}
	s.fn = fn
	return s, nil
}

// LastError is the last error YoMo reported through the sink's error handler, or nil.
func (s *Sink) LastError() error { return s.fn.errs.Last() }

// Close closes the sink within its close bound.
func (s *Sink) Close() error { return s.fn.close() }
