package main

import (
	"flag"

	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// zipperListening is the line `yomo-peer zipper` prints once clients can connect.
type zipperListening struct {
	Listening string `json:"listening"`
}

// zipperMesh is the line it prints once the link to a mesh peer has connected.
type zipperMesh struct {
	MeshConnected string `json:"mesh_connected"`
}

// zipperFailed is the line it prints when it cannot serve.
type zipperFailed struct {
	Error string `json:"error"`
}

// runZipper serves YoMo's zipper as `yomo serve` would, until SIGTERM/SIGINT, on which YoMo's
// own handler closes it and exits with status 0 (no CONNECTION_CLOSE reaches clients).
func runZipper(args []string) int {
	fs := flag.NewFlagSet("zipper", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:9000", "listen address host:port (UDP; port 0: any)")
	cfg := peer.ZipperConfig{Standalone: true}
	fs.StringVar(&cfg.Name, "name", "yomo-peer-zipper", "zipper name")
	fs.StringVar(&cfg.Token, "token", "", "require credential token:<T> from clients")
	fs.BoolVar(&cfg.RejectReserved, "reject-reserved", false, "close clients writing tags 0xF000..0xFFFF (yomo serve's middleware)")
	mesh := fs.String("mesh", "", "downstream zippers name=host:port,... (dialed as UpstreamZipper clients)")
	meshCredential := fs.String("mesh-credential", "", `credential for the mesh peers, "token:<T>"`)
	parse(fs, args)

	peers, err := peer.ParseMesh(*mesh, *meshCredential)
	if err != nil {
		usageError(fs, err.Error())
	}
	cfg.Mesh = peers
	meshUp := make(chan string, len(peers))
	cfg.OnMesh = func(name string) { meshUp <- name }
	z, err := peer.StartZipper(cfg, *addr)
	if err != nil {
		emit(zipperFailed{Error: err.Error()})
		return 1
	}
	emit(zipperListening{Listening: z.Addr()})
	// After the listening line, whichever comes first: one line per mesh link.
	go func() {
		for name := range meshUp {
			emit(zipperMesh{MeshConnected: name})
		}
	}()
	if err := <-z.Done(); err != nil {
		emit(zipperFailed{Error: err.Error()})
		return 1
	}
	return 0
}
