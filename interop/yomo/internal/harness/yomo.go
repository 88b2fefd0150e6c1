package harness

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// yomoRouter is YoMo's zipper in this process.
type yomoRouter struct {
	t    testing.TB
	opts Options
	addr string

	mu     sync.Mutex
	zipper *peer.Zipper        // nil while stopped
	live   map[string]int      // connected clients by name
	ids    map[string][]string // handshake IDs by client name, in arrival order
}

func startYoMo(t testing.TB, opts Options, addr string) *yomoRouter {
	t.Helper()
	r := &yomoRouter{t: t, opts: opts, live: map[string]int{}, ids: map[string][]string{}}
	r.start(addr)
	return r
}

func (r *yomoRouter) start(addr string) {
	r.t.Helper()
	name := r.opts.Name
	if name == "" {
		name = "yomo-zipper"
	}
	z, err := peer.StartZipper(peer.ZipperConfig{
		Name:           name,
		Token:          r.opts.Token,
		RejectReserved: r.opts.RejectReserved,
		Mesh:           r.opts.Mesh,
		OnConn:         r.onConn,
	}, addr)
	if err != nil {
		r.t.Fatalf("start YoMo zipper on %s: %v", addr, err)
	}
	r.mu.Lock()
	r.zipper, r.addr = z, z.Addr()
	r.mu.Unlock()
}

func (r *yomoRouter) Kind() Kind { return YoMo }

func (r *yomoRouter) Addr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addr
}

func (r *yomoRouter) Stop() {
	r.mu.Lock()
	z := r.zipper
	r.zipper = nil
	r.mu.Unlock()
	if z == nil {
		return
	}
	if err := z.Stop(); err != nil {
		r.t.Errorf("stop YoMo zipper: %v", err)
	}
}

// Restart stops the zipper and serves a new one on the same address. YoMo's zipper sends
// nothing to its clients when it stops (a `yomo serve` process just exits), so clients
// find out by their 5 s idle timeout and then reconnect.
func (r *yomoRouter) Restart() {
	r.t.Helper()
	addr := r.Addr()
	r.Stop()
	r.start(addr)
}

// Observer is implemented by routers that can say which clients are connected: the
// in-process YoMo zipper, through a connection middleware.
type Observer interface {
	// WaitConnected waits until a client named name has been acknowledged (its routes are
	// in place) or ctx ends.
	WaitConnected(ctx context.Context, name string) error
	// ClientIDs are the handshake IDs (id-N) clients named name have connected with.
	ClientIDs(name string) []string
}

func (r *yomoRouter) onConn(ev peer.ConnEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ev.Connected {
		r.live[ev.Name]++
		r.ids[ev.Name] = append(r.ids[ev.Name], ev.ClientID)
	} else {
		r.live[ev.Name]--
	}
}

func (r *yomoRouter) WaitConnected(ctx context.Context, name string) error {
	for {
		r.mu.Lock()
		n := r.live[name]
		r.mu.Unlock()
		if n > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (r *yomoRouter) ClientIDs(name string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ids[name])
}

// AcceptedConnections counts the handshakes acknowledged so far, restarts and mesh links
// included.
func (r *yomoRouter) AcceptedConnections() (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ids := range r.ids {
		n += len(ids)
	}
	return n, nil
}

var (
	_ Observer    = (*yomoRouter)(nil)
	_ ConnCounter = (*yomoRouter)(nil)
)
