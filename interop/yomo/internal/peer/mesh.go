package peer

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/yomorun/yomo/core"
	"github.com/yomorun/yomo/core/frame"
)

// MeshPeer is one downstream zipper of a mesh (`mesh: {name: {host, port, credential}}`).
type MeshPeer struct {
	// Name is the peer's name in the mesh config.
	Name string
	// Addr is its QUIC address, host:port.
	Addr string
	// Credential is sent when dialing it, "token:<secret>"; empty for none.
	Credential string
}

// ParseMesh reads `name=host:port,name=host:port`; every peer gets credential.
func ParseMesh(text, credential string) ([]MeshPeer, error) {
	var peers []MeshPeer
	for _, item := range strings.Split(text, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, addr, ok := strings.Cut(item, "=")
		if !ok || name == "" || addr == "" {
			return nil, fmt.Errorf("invalid mesh peer %q (expected name=host:port)", item)
		}
		peers = append(peers, MeshPeer{Name: name, Addr: addr, Credential: credential})
	}
	return peers, nil
}

// downstream is a mesh link: a YoMo client of type UpstreamZipper (0x5E) that this zipper
// forwards its local frames through, built with the client options yomo.NewZipper gives
// its mesh links (credential, non-blocking writes, reconnect).
type downstream struct {
	name   string
	client *core.Client
}

func newDownstream(zipperName string, p MeshPeer, logger *slog.Logger) *downstream {
	client := core.NewClient(zipperName, p.Addr, core.ClientTypeUpstreamZipper,
		core.WithCredential(p.Credential),
		core.WithNonBlockWrite(),
		core.WithReConnect(),
		core.WithLogger(logger.With("downstream_name", p.Name, "downstream_addr", p.Addr)),
	)
	return &downstream{name: p.Name, client: client}
}

// The core.Downstream interface.

func (d *downstream) Close() error                      { return d.client.Close() }
func (d *downstream) Connect(ctx context.Context) error { return d.client.Connect(ctx) }
func (d *downstream) ID() string                        { return d.client.ClientID() }
func (d *downstream) LocalName() string                 { return d.name }
func (d *downstream) RemoteName() string                { return d.client.Name() }
func (d *downstream) WriteFrame(f frame.Frame) error    { return d.client.WriteFrame(f) }

var _ core.Downstream = (*downstream)(nil)
