package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/yomorun/yomo"
	"github.com/yomorun/yomo/core"
)

// ZipperConfig is a YoMo zipper as `yomo serve` would run it from its YAML config.
type ZipperConfig struct {
	// Name is the zipper's name (also the name it gives itself when dialing mesh peers).
	Name string
	// Token, when not empty, makes the zipper admit only clients whose credential is
	// "token:<Token>" (`auth: {type: token, token: ...}`).
	//
	// YoMo keeps the token in a process-wide singleton (pkg/auth registers one TokenAuth
	// and core.WithAuth re-initialises it), so zippers in one process share one token: the
	// last one started wins.
	Token string
	// RejectReserved installs core.RejectReservedTagMiddleware, as `yomo serve` does: a
	// client writing a tag in [0xF000, 0xFFFF] is closed with code 0x13.
	RejectReserved bool
	// Mesh lists the downstream zippers this one forwards every local frame to.
	Mesh []MeshPeer
	// OnMesh, when not nil, is told the name of each mesh peer once its link has connected
	// (handshake acknowledged: frames written from then on go to it). It is called once
	// per peer, from the link's goroutine.
	OnMesh func(name string)
	// Logger is the zipper's logger; nil means [Logger].
	Logger *slog.Logger
	// OnConn, when not nil, is told about every client once its handshake has been
	// acknowledged (and its routes added), and again when its connection ends. It is a YoMo
	// connection middleware and must not block.
	OnConn func(ConnEvent)
	// Standalone builds the zipper with yomo.NewZipper, which also installs YoMo's signal
	// handler (SIGTERM/SIGINT: close and os.Exit(0), no CONNECTION_CLOSE sent). Leave it
	// false inside tests: the handler would exit the test binary.
	Standalone bool
}

// ConnEvent is a client connecting to or leaving a [Zipper].
type ConnEvent struct {
	// Name is the client's app name.
	Name string
	// ClientID is the handshake ID: the client's id, "-", and its reconnect counter.
	ClientID string
	// ClientType is Source, StreamFunction or UpstreamZipper.
	ClientType core.ClientType
	// Connected is true when the client arrives, false when it leaves.
	Connected bool
}

// connObserver turns a ZipperConfig.OnConn callback into a YoMo connection middleware.
func connObserver(onConn func(ConnEvent)) core.ConnMiddleware {
	return func(next core.ConnHandler) core.ConnHandler {
		return func(c *core.Connection) {
			ev := ConnEvent{Name: c.Name(), ClientID: c.ClientID(), ClientType: c.ClientType(), Connected: true}
			onConn(ev)
			defer func() {
				ev.Connected = false
				onConn(ev)
			}()
			next(c)
		}
	}
}

// Zipper is a running YoMo core server on a UDP socket this package owns.
type Zipper struct {
	server *core.Server
	conn   net.PacketConn
	mesh   []*downstream
	served chan error
}

// StartZipper binds addr (host:port, port 0 for any) and serves YoMo's zipper on it. Clients
// can connect as soon as it returns.
func StartZipper(cfg ZipperConfig, addr string) (*Zipper, error) {
	udp, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	conn, err := net.ListenUDP("udp", udp)
	if err != nil {
		return nil, err
	}
	server, err := newServer(cfg)
	if err != nil {
		conn.Close()
		return nil, err
	}
	z := &Zipper{server: server, conn: conn, served: make(chan error, 1)}
	// What core.Server.ListenAndServe does, on a socket we hold: connect the mesh links,
	// then serve. (ListenAndServe binds its own socket and cannot report its port.)
	for _, p := range cfg.Mesh {
		d := newDownstream(cfg.Name, p, server.Logger())
		server.AddDownstreamServer(d)
		z.mesh = append(z.mesh, d)
		go func() {
			if err := d.Connect(context.Background()); err == nil && cfg.OnMesh != nil {
				cfg.OnMesh(d.name)
			}
		}()
	}
	go func() { z.served <- server.Serve(context.Background(), conn) }()
	return z, nil
}

// newServer builds the core server with the options `yomo serve` derives from its config.
func newServer(cfg ZipperConfig) (*core.Server, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = Logger()
	}
	var server *core.Server
	if cfg.Standalone {
		opts := []yomo.ZipperOption{yomo.WithZipperLogger(logger)}
		if cfg.Token != "" {
			opts = append(opts, yomo.WithAuth("token", cfg.Token))
		}
		if cfg.RejectReserved {
			opts = append(opts, yomo.WithZipperFrameMiddleware(core.RejectReservedTagMiddleware))
		}
		if cfg.OnConn != nil {
			opts = append(opts, yomo.WithZipperConnMiddleware(connObserver(cfg.OnConn)))
		}
		// Mesh links are added by StartZipper, which owns the socket.
		z, err := yomo.NewZipper(cfg.Name, nil, opts...)
		if err != nil {
			return nil, err
		}
		s, ok := z.(*core.Server)
		if !ok {
			return nil, fmt.Errorf("yomo.NewZipper returned %T, not *core.Server", z)
		}
		server = s
	} else {
		opts := []core.ServerOption{core.WithServerLogger(logger)}
		if cfg.Token != "" {
			opts = append(opts, core.WithAuth("token", cfg.Token))
		}
		if cfg.RejectReserved {
			opts = append(opts, core.WithFrameMiddleware(core.RejectReservedTagMiddleware))
		}
		if cfg.OnConn != nil {
			opts = append(opts, core.WithConnMiddleware(connObserver(cfg.OnConn)))
		}
		server = core.NewServer(cfg.Name, opts...)
	}
	return server, nil
}

// Addr is the address the zipper listens on, host:port.
func (z *Zipper) Addr() string { return z.conn.LocalAddr().String() }

// Done receives Serve's result once the zipper stopped serving.
func (z *Zipper) Done() <-chan error { return z.served }

// Stop ends the zipper the way a killed `yomo serve` ends: no CONNECTION_CLOSE reaches the
// clients (YoMo's SIGTERM handler calls os.Exit), so they notice by their idle timeout
// (5 s) and then reconnect. It closes the server, waits for Serve to return (bounded), and
// closes the socket, so that the address can be bound again.
func (z *Zipper) Stop() error {
	_ = z.server.Close()
	var err error
	select {
	case err = <-z.served:
		if errors.Is(err, core.ErrServerClosed) {
			err = nil
		}
	case <-time.After(5 * time.Second):
		err = fmt.Errorf("zipper Serve did not return: %w", ErrTimeout)
	}
	if cerr := z.conn.Close(); err == nil {
		err = cerr
	}
	return err
}
