package harness

import (
	"testing"

	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// Kind is which router implementation is under test.
type Kind string

const (
	// YoMo is YoMo v1.22.0's own zipper (core.Server), in this process.
	YoMo Kind = "yomo"
	// Y3 is `$Y3_BIN serve`, a subprocess.
	Y3 Kind = "y3"
)

// Kinds is every router kind, the rows of the tests' tables.
var Kinds = []Kind{YoMo, Y3}

// Options configure a router.
type Options struct {
	// Name is the zipper's name (YoMo: also the name it dials mesh peers with).
	Name string
	// Token, when not empty, is required from every client ("token:<Token>").
	Token string
	// RejectReserved refuses tags 0xF000..0xFFFF as `yomo serve` does. y3 always does.
	RejectReserved bool
	// Mesh lists downstream routers this one forwards every local frame to.
	Mesh []peer.MeshPeer
	// Filters are content filters the router's config attaches to stream functions by
	// name (y3's [[filters.attach]], spec/filters.md). YoMo's zipper has none: Start skips
	// a YoMo router asked for filters.
	Filters []Filter
	// TCPTLS serves TLS on y3's TCP listener (`--tcp-tls`), as mutual TLS requires. YoMo's
	// zipper has no TCP listener.
	TCPTLS bool
	// Config is TOML appended to y3's config file (e.g. "[limits]\nmax_frame_len = 65536").
	// YoMo's zipper has no such settings: Start leaves it out for a YoMo router.
	Config string
}

// Filter is one [[filters.attach]] entry: frames on Tag reach the functions named Function
// only when their payload matches Text.
type Filter struct {
	Function string
	Tag      uint32
	Text     string
}

// Router is a running router under test. Start registers its Stop as a test cleanup.
type Router interface {
	// Kind is the implementation.
	Kind() Kind
	// Addr is its QUIC address, 127.0.0.1:PORT.
	Addr() string
	// Stop stops it (y3: SIGTERM, bounded; YoMo: as a killed `yomo serve`, no close sent).
	Stop()
	// Restart stops it and starts it again on the same address with the same options.
	Restart()
}

// Start starts a router of kind, skipping the test when kind is [Y3] and $Y3_BIN is unset.
func Start(t testing.TB, kind Kind, opts Options) Router {
	t.Helper()
	if kind == YoMo && len(opts.Filters) > 0 {
		t.Skip("YoMo's zipper has no content filters")
	}
	var r Router
	switch kind {
	case YoMo:
		r = startYoMo(t, opts, "127.0.0.1:0")
	case Y3:
		r = startY3(t, opts, "")
	default:
		t.Fatalf("unknown router kind %q", kind)
	}
	t.Cleanup(r.Stop)
	return r
}

// ConnCounter is implemented by routers that count the client connections they took in:
// y3 from its `y3_router_accepted_connections_total` metric, YoMo from acknowledged
// handshakes. A count that grows while no client was added means some client reconnected.
type ConnCounter interface {
	// AcceptedConnections is the number of client connections taken in so far (y3: since
	// its last start; YoMo: since the test started it, restarts included).
	AcceptedConnections() (int, error)
}

// Client is how a YoMo client named name reaches r with r's token.
func Client(r Router, name, token string) peer.ClientConfig {
	return peer.ClientConfig{Addr: r.Addr(), Name: name, Token: token}
}
