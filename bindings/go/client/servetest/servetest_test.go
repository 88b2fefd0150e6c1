package servetest

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, d Dir, pid, schema int) {
	t.Helper()
	if err := writeDoc(d, pid, schema); err != nil {
		t.Fatal(err)
	}
}

func writeDoc(d Dir, pid, schema int) error {
	doc := fmt.Sprintf(`{"schema":%d,"pid":%d,"version":"0.1.0","listeners":{"tcp":"127.0.0.1:1"},`+
		`"tcp_tls":false,"certificate":{"sha256":"ab","self_signed":true,"path":null},"config":null}`, schema, pid)
	return os.WriteFile(d.ReadyPath(), []byte(doc), 0o600)
}

// Wait returns the document of the process it waits for, once it appears; one left by
// another process (a stale file) is not taken; Args removes it.
func TestWaitTakesOnlyItsProcesssDocument(t *testing.T) {
	d := Dir(t.TempDir())
	write(t, d, 1, Schema)
	if args := d.Args(); len(args) != 2 || args[1] != d.ReadyPath() {
		t.Fatalf("args %v", args)
	}
	if _, err := os.Stat(d.ReadyPath()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale ready file kept: %v", err)
	}
	write(t, d, 1, Schema)
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = writeDoc(d, 42, Schema) // a failure shows as Wait's timeout
	}()
	r, err := d.Wait(42, 5*time.Second, nil)
	if err != nil || r.Listener("tcp") != "127.0.0.1:1" || r.Listener("quic") != "" || r.Certificate.Path != "" {
		t.Fatalf("%+v, %v", r, err)
	}
}

// A process that ends first, a document of another layout and a timeout are errors.
func TestWaitErrors(t *testing.T) {
	d := Dir(t.TempDir())
	exited := make(chan struct{})
	close(exited)
	if _, err := d.Wait(7, 5*time.Second, exited); !errors.Is(err, ErrExited) {
		t.Fatalf("exited: %v", err)
	}
	if _, err := d.Wait(7, 20*time.Millisecond, nil); err == nil || !strings.Contains(err.Error(), "no ready file") {
		t.Fatalf("timeout: %v", err)
	}
	write(t, d, 7, Schema+1)
	if _, err := d.Wait(7, 5*time.Second, nil); err == nil || !strings.Contains(err.Error(), "schema") {
		t.Fatalf("schema: %v", err)
	}
	if env := d.Env(); len(env) != 2 || env[0] != "XDG_RUNTIME_DIR="+string(d) {
		t.Fatalf("env %v", env)
	}
}
