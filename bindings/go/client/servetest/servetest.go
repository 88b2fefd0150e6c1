// Package servetest is the one way the Go tests (this module's and interop/yomo's) learn
// where a `y3 serve` they started listens: its ready file (`y3 serve --ready-file PATH`,
// docs/operations.md "The ready file"), one JSON document written atomically once every
// listener is bound, instead of its human-readable startup lines.
//
// A [Dir] is one router's private directory: the ready file, and, as the router's
// XDG_RUNTIME_DIR and XDG_STATE_HOME, its dev certificate and state (kept out of the user's
// ~/.cache/y3 and ~/.local/state/y3). Give it a test's t.TempDir(), which the test removes.
//
//	dir := servetest.Dir(t.TempDir())
//	cmd := exec.Command(bin, append([]string{"serve", "--tcp", "127.0.0.1:0"}, dir.Args()...)...)
//	cmd.Env = append(os.Environ(), dir.Env()...)
//	// start cmd, close exited when it ends
//	ready, err := dir.Wait(cmd.Process.Pid, 20*time.Second, exited)
package servetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Schema is the ready file layout this package reads (its "schema" key).
const Schema = 1

// FileName is the ready file's name inside a [Dir].
const FileName = "ready.json"

// Ready is the ready file's document.
type Ready struct {
	// Schema is the writer's layout version.
	Schema int `json:"schema"`
	// PID is the router's process id.
	PID int `json:"pid"`
	// Version is y3's version.
	Version string `json:"version"`
	// Listeners maps each listener that is on ("tcp", "quic", "metrics", "mqtt") to its
	// bound address, IP:PORT.
	Listeners map[string]string `json:"listeners"`
	// TCPTLS tells whether the TCP listener speaks TLS.
	TCPTLS bool `json:"tcp_tls"`
	// Certificate is the server certificate.
	Certificate Certificate `json:"certificate"`
	// Config is the configuration file given with -c, or "".
	Config string `json:"config"`
}

// Certificate is the "certificate" object of [Ready].
type Certificate struct {
	// SHA256 is the certificate's SHA-256, 64 hex digits (what clients' --pin takes).
	SHA256 string `json:"sha256"`
	// SelfSigned tells whether it is the generated development certificate.
	SelfSigned bool `json:"self_signed"`
	// Path is where that development certificate was written (PEM), or "".
	Path string `json:"path"`
}

// Dir is one router's private directory.
type Dir string

// ReadyPath is where the router writes its ready file.
func (d Dir) ReadyPath() string { return filepath.Join(string(d), FileName) }

// Args removes a ready file an earlier router left in d and returns the arguments that
// make the next one write its own: --ready-file DIR/ready.json.
func (d Dir) Args() []string {
	_ = os.Remove(d.ReadyPath())
	return []string{"--ready-file", d.ReadyPath()}
}

// Env is the environment that keeps the router's dev certificate and state in d.
func (d Dir) Env() []string {
	return []string{"XDG_RUNTIME_DIR=" + string(d), "XDG_STATE_HOME=" + string(d)}
}

// ErrExited is returned by [Dir.Wait] when the process ended before it was ready.
var ErrExited = errors.New("y3 serve exited before it was ready")

// Wait waits at most timeout until the process pid has written its ready file in d, and
// returns the document. exited, closed when the process ends, stops the wait early with
// [ErrExited].
func (d Dir) Wait(pid int, timeout time.Duration, exited <-chan struct{}) (*Ready, error) {
	deadline := time.After(timeout)
	for {
		r, err := d.read()
		switch {
		case err == nil && r.PID == pid:
			return r, nil
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
		select {
		case <-exited:
			return nil, ErrExited
		case <-deadline:
			return nil, fmt.Errorf("y3 serve wrote no ready file %s within %s", d.ReadyPath(), timeout)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (d Dir) read() (*Ready, error) {
	b, err := os.ReadFile(d.ReadyPath())
	if err != nil {
		return nil, err
	}
	var r Ready
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("ready file %s: %w", d.ReadyPath(), err)
	}
	if r.Schema != Schema {
		return nil, fmt.Errorf("ready file %s: schema %d, this package reads %d", d.ReadyPath(), r.Schema, Schema)
	}
	return &r, nil
}

// Listener is the bound address of the listener kind ("tcp", "quic", "metrics", "mqtt"),
// or "" when it is off.
func (r *Ready) Listener(kind string) string { return r.Listeners[kind] }
