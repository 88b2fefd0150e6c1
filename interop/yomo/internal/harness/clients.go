package harness

import (
	"testing"

	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// Source connects a YoMo source or fails the test; it is closed at cleanup.
func Source(t testing.TB, cc peer.ClientConfig) *peer.Source {
	t.Helper()
	s, err := peer.ConnectSource(cc)
	if err != nil {
		t.Fatalf("connect YoMo source %q to %s: %v", cc.Name, cc.Addr, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Sink connects a YoMo stream function that only counts, or fails the test; it is closed
// at cleanup.
func Sink(t testing.TB, cfg peer.FunctionConfig) *peer.Sink {
	t.Helper()
	s, err := peer.ConnectSink(cfg)
	if err != nil {
		t.Fatalf("connect YoMo sink %q to %s: %v", cfg.Name, cfg.Addr, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Relay connects a YoMo stream function that re-emits what it observes, or fails the test;
// it is closed at cleanup.
func Relay(t testing.TB, cfg peer.RelayConfig) *peer.Relay {
	t.Helper()
	r, err := peer.ConnectRelay(cfg)
	if err != nil {
		t.Fatalf("connect YoMo relay %q to %s: %v", cfg.Name, cfg.Addr, err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}
