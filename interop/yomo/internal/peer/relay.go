package peer

import (
	"sync/atomic"

	"github.com/yomorun/yomo/serverless"
)

// RelayConfig is a stream function that re-emits every payload it observes under Emit.
type RelayConfig struct {
	FunctionConfig
	// Emit is the tag of the frames it writes.
	Emit uint32
}

// Relay is a YoMo stream function whose handler calls ctx.Write(emit, data) for every frame,
// unchanged; YoMo keeps the frame's metadata (yomo-tid, yomo-source-id) on the way.
type Relay struct {
	fn       *function
	received atomic.Int64
	relayed  atomic.Int64
	errors   atomic.Int64
}

// ConnectRelay creates and connects a relay.
func ConnectRelay(cfg RelayConfig) (*Relay, error) {
	r := &Relay{}
	fn, err := connectFunction(cfg.FunctionConfig, "yomo-peer-sfn", func(ctx serverless.Context) {
		r.received.Add(1)
		if err := ctx.Write(cfg.Emit, ctx.Data()); err != nil {
			r.errors.Add(1)
			return
		}
		r.relayed.Add(1)
	})
	if err != nil {
		return nil, err
	}
	r.fn = fn
	return r, nil
}

// RelayReport is the JSON summary of `yomo-peer sfn`.
type RelayReport struct {
	// Received is the number of frames the handler was called with.
	Received int64 `json:"received"`
	// Relayed is the number of ctx.Write calls that returned no error.
	Relayed int64 `json:"relayed"`
	// Errors is the number of ctx.Write calls that returned an error.
	Errors int64 `json:"errors"`
	// Error is the connect error, when connecting failed.
	Error string `json:"error,omitempty"`
}

// Report is what the relay has done so far.
func (r *Relay) Report() RelayReport {
	return RelayReport{Received: r.received.Load(), Relayed: r.relayed.Load(), Errors: r.errors.Load()}
}

// Received is the number of frames the handler was called with so far.
func (r *Relay) Received() int64 { return r.received.Load() }

// Close closes the relay within its close bound.
func (r *Relay) Close() error { return r.fn.close() }
