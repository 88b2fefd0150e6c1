package peer

import (
	"github.com/yomorun/yomo"
	"github.com/yomorun/yomo/core/metadata"
	"github.com/yomorun/yomo/serverless"
)

// FunctionConfig is a YoMo stream function: what it observes and which target it accepts.
type FunctionConfig struct {
	ClientConfig
	// Observe lists the data tags the function subscribes to.
	Observe []uint32
	// WantedTarget, when not empty, is the target this function accepts: frames written
	// with that target reach it, frames with another target do not.
	WantedTarget string
}

// function is a connected yomo.NewStreamFunction.
type function struct {
	sfn  yomo.StreamFunction
	cc   ClientConfig
	errs errorLog
}

// connectFunction creates a YoMo stream function that calls handle for every frame and
// connects it within cfg's connect bound.
func connectFunction(cfg FunctionConfig, fallbackName string, handle func(serverless.Context)) (*function, error) {
	f := &function{cc: cfg.ClientConfig}
	f.sfn = yomo.NewStreamFunction(cfg.name(fallbackName), cfg.Addr, cfg.sfnOptions()...)
	f.sfn.SetObserveDataTags(cfg.Observe...)
	f.sfn.SetWantedTarget(cfg.WantedTarget)
	f.sfn.SetErrorHandler(f.errs.record)
	if err := f.sfn.SetHandler(handle); err != nil {
		return nil, err
	}
	if err := connectWithin(cfg.ClientConfig, f.sfn.Connect, f.sfn.Close, &f.errs); err != nil {
		return nil, err
	}
	return f, nil
}

// close closes the function within its close bound (see [Source.Close]).
func (f *function) close() error {
	if f.errs.RemoteClose() != nil {
		return nil
	}
	return within(f.cc.closeTimeout(), "close stream function", f.sfn.Close)
}

// metadataOf reads the two keys every YoMo source sets.
func metadataOf(ctx serverless.Context) (tid, sourceID string) {
	tid, _ = ctx.Metadata(metadata.TIDKey)
	sourceID, _ = ctx.Metadata(metadata.SourceIDKey)
	return tid, sourceID
}
