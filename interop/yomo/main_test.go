package interop_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// peerBin is the yomo-peer binary built once for the tests that run it as a subprocess.
var peerBin struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

func TestMain(m *testing.M) {
	code := m.Run()
	if peerBin.dir != "" {
		os.RemoveAll(peerBin.dir)
	}
	os.Exit(code)
}

// buildPeer builds cmd/yomo-peer (once per test binary) and returns its path.
func buildPeer(t *testing.T) string {
	t.Helper()
	peerBin.once.Do(func() {
		peerBin.dir, peerBin.err = os.MkdirTemp("", "yomo-peer-")
		if peerBin.err != nil {
			return
		}
		peerBin.path = filepath.Join(peerBin.dir, "yomo-peer")
		cmd := exec.Command("go", "build", "-o", peerBin.path, "./cmd/yomo-peer")
		peerBin.out, peerBin.err = cmd.CombinedOutput()
	})
	if peerBin.err != nil {
		t.Fatalf("go build ./cmd/yomo-peer: %v\n%s", peerBin.err, peerBin.out)
	}
	return peerBin.path
}
