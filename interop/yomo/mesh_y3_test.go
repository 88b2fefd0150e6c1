package interop_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/y3-dev/y3/interop/yomo/internal/harness"
	"github.com/y3-dev/y3/interop/yomo/internal/peer"
)

// The mesh between y3 and YoMo's own zipper, both ways: a YoMo zipper forwarding to
// `y3 serve` (y3 admits its UpstreamZipper 0x5E link and delivers locally), and `y3 serve`
// forwarding to a YoMo zipper through its [mesh] config (y3 dials as 0x5E with its
// [mesh].name). Every client is YoMo's. The y3 routers here are started with a TOML config
// written by meshY3 below; the shared harness starts y3 without a mesh.

// meshY3 is `$Y3_BIN serve --config FILE` with FILE holding a [mesh] section.
type meshY3 struct {
	proc *harness.Process
	addr string
}

// startMeshY3 runs y3 serve named name with QUIC on quicAddr ("" for a free port) and
// downstream zippers mesh; it is stopped (SIGTERM, bounded) at cleanup.
func startMeshY3(t *testing.T, name, quicAddr string, mesh []peer.MeshPeer) *meshY3 {
	t.Helper()
	if quicAddr == "" {
		quicAddr = harness.FreeUDPAddr(t)
	}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "[mesh]\nname = %q\n", name)
	for _, p := range mesh {
		fmt.Fprintf(&cfg, "\n[[mesh.downstream]]\nname = %q\naddr = %q\ncredential = %q\ntransport = \"quic\"\n",
			p.Name, p.Addr, p.Credential)
	}
	file := filepath.Join(t.TempDir(), "router.toml")
	if err := os.WriteFile(file, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	p, ready := harness.StartY3(t, t.TempDir(), nil,
		"serve", "--config", file, "--tcp", "127.0.0.1:0", "--quic", quicAddr, "--metrics", "")
	r := &meshY3{proc: p, addr: ready.Listener("quic")}
	if r.addr == "" {
		t.Fatalf("no quic address in %+v\nconfig:\n%s", ready, cfg.String())
	}
	t.Cleanup(r.Stop)
	return r
}

func (r *meshY3) Kind() harness.Kind { return harness.Y3 }
func (r *meshY3) Addr() string       { return r.addr }
func (r *meshY3) Stop()              { _ = r.proc.Stop() }
func (r *meshY3) Restart()           { panic("meshY3 does not restart") }

var _ harness.Router = (*meshY3)(nil)

// probeFrom is probeUntil with probes numbered from base (so that two sources' probes are
// told apart): it writes one every 100 ms until sk received one.
func probeFrom(t *testing.T, ctx context.Context, src *peer.Source, sk *peer.Sink, base uint64) {
	t.Helper()
	for seq := base; sk.Tracker.MaxSeq() < base; seq++ {
		_ = src.WriteStamped(tagIn, seq, 32, "")
		select {
		case <-ctx.Done():
			t.Fatalf("no probe from %d arrived: %v (last source error: %v)", base, ctx.Err(), src.LastError())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkOnce fails the test unless sk got every seq in [0, n) exactly once, each frame with
// a yomo-tid and the one source's yomo-source-id.
func checkOnce(t *testing.T, name string, sk *peer.Sink, n int, sources int) {
	t.Helper()
	rep := sk.Tracker.Report(0, n)
	if rep.Missing != 0 || rep.Duplicates != 0 || !rep.TidOK || !rep.SourceIDOK || len(rep.SourceIDs) != sources {
		t.Errorf("%s: %+v", name, rep)
	}
}

// A YoMo zipper with y3 as its mesh downstream: a YoMo source on the zipper reaches a YoMo
// sink on y3 exactly once, metadata kept.
func TestMeshYoMoZipperToY3(t *testing.T) {
	const n = 500
	b := startMeshY3(t, "y3-b", "", nil)
	a := harness.Start(t, harness.YoMo, harness.Options{
		Name: "zipper-a",
		Mesh: []peer.MeshPeer{{Name: "y3-b", Addr: b.Addr()}},
	})
	onB := sink(t, b, "sink-b", tagIn)
	src := harness.Source(t, harness.Client(a, "source", ""))

	ctx := bounded(t, 20*time.Second)
	probeUntil(t, ctx, src, tagIn, onB)
	writeBatch(t, src, tagIn, 0, n, 64, "")
	waitRange(t, ctx, onB, 0, n)
	settle()
	checkOnce(t, "sink-b on y3", onB, n, 1)
}

// y3 with a YoMo zipper as its mesh downstream: a YoMo source on y3 reaches a YoMo sink on
// the zipper (and one on y3) exactly once; the zipper sees y3's link under y3's mesh name.
func TestMeshY3ToYoMoZipper(t *testing.T) {
	const n = 500
	b := harness.Start(t, harness.YoMo, harness.Options{Name: "zipper-b"})
	a := startMeshY3(t, "y3-a", "", []peer.MeshPeer{{Name: "zipper-b", Addr: b.Addr()}})
	onB := sink(t, b, "sink-b", tagIn)
	onA := sink(t, a, "sink-a", tagIn)
	src := harness.Source(t, harness.Client(a, "source", ""))

	ctx := bounded(t, 20*time.Second)
	if obs, ok := b.(harness.Observer); ok {
		if err := obs.WaitConnected(ctx, "y3-a"); err != nil {
			t.Fatalf("y3's mesh link (name y3-a) never reached the YoMo zipper: %v", err)
		}
	}
	probeUntil(t, ctx, src, tagIn, onB)
	writeBatch(t, src, tagIn, 0, n, 64, "")
	waitRange(t, ctx, onB, 0, n)
	waitRange(t, ctx, onA, 0, n)
	settle()
	checkOnce(t, "sink-b on the YoMo zipper", onB, n, 1)
	checkOnce(t, "sink-a on y3", onA, n, 1)
}

// y3 and a YoMo zipper list each other: a source on each side reaches the sinks on both
// exactly once. A frame that crossed the mesh is not sent back by either router, or some
// sink would see it twice.
func TestMeshY3AndYoMoListEachOther(t *testing.T) {
	const n = 300
	y3Addr := harness.FreeUDPAddr(t)
	z := harness.Start(t, harness.YoMo, harness.Options{
		Name: "zipper-z",
		Mesh: []peer.MeshPeer{{Name: "y3-y", Addr: y3Addr}},
	})
	y := startMeshY3(t, "y3-y", y3Addr, []peer.MeshPeer{{Name: "zipper-z", Addr: z.Addr()}})
	onY := sink(t, y, "sink-y", tagIn)
	onZ := sink(t, z, "sink-z", tagIn)
	srcY := harness.Source(t, harness.Client(y, "source-y", ""))
	srcZ := harness.Source(t, harness.Client(z, "source-z", ""))

	ctx := bounded(t, 30*time.Second)
	// Both links carry frames: y3 → YoMo, then YoMo → y3 (YoMo dials y3 with reconnect,
	// and y3 was not up when the zipper started).
	probeUntil(t, ctx, srcY, tagIn, onZ)
	probeFrom(t, ctx, srcZ, onY, 2*probeSeq)
	writeBatch(t, srcY, tagIn, 0, n, 64, "")
	writeBatch(t, srcZ, tagIn, n, n, 64, "")
	for _, sk := range []*peer.Sink{onY, onZ} {
		waitRange(t, ctx, sk, 0, 2*n)
	}
	settle()
	for name, sk := range map[string]*peer.Sink{"sink-y on y3": onY, "sink-z on YoMo": onZ} {
		// Probes included: no frame, probe or batch, arrived twice.
		checkOnce(t, name, sk, 2*n, 2)
	}
}
