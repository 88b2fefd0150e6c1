package harness

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Bounds on subprocesses.
const (
	// ReadyTimeout bounds the wait for a subprocess's readiness line.
	ReadyTimeout = 20 * time.Second
	// StopTimeout is how long a subprocess gets after SIGTERM before it is killed.
	StopTimeout = 5 * time.Second
)

// Process is a subprocess whose stdout is read line by line and whose stderr is kept.
type Process struct {
	cmd    *exec.Cmd
	lines  chan string // stdout lines; closed at EOF
	stderr lockedBuffer
	exited chan struct{}
	err    error // Wait's result, once exited is closed

	stopOnce sync.Once
}

// StartProcess starts bin with args; stdin is empty unless stdin is not nil. The process is
// killed at test cleanup if still running, and its stderr is logged if the test failed.
func StartProcess(t testing.TB, stdin io.Reader, env []string, bin string, args ...string) *Process {
	t.Helper()
	p := &Process{lines: make(chan string, 4096), exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdin = stdin
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("%s %s stderr:\n%s", bin, strings.Join(args, " "), p.Stderr())
		}
	})
	return p
}

// WaitLine returns the first stdout line that starts with prefix, skipping others, or an
// error when the process exits or timeout passes first.
func (p *Process) WaitLine(prefix string, timeout time.Duration) (string, error) {
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				<-p.exited
				return "", fmt.Errorf("exited (%v) before printing %q", p.err, prefix)
			}
			if strings.HasPrefix(line, prefix) {
				return line, nil
			}
		case <-deadline:
			return "", fmt.Errorf("no line starting %q within %s", prefix, timeout)
		}
	}
}

// Lines is the process's stdout, one line at a time; closed at EOF.
func (p *Process) Lines() <-chan string { return p.lines }

// Wait waits for the process to exit within timeout and returns its Wait error; after the
// timeout the process is killed and an error returned.
func (p *Process) Wait(timeout time.Duration) error {
	go p.drain()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("did not exit within %s; killed", timeout)
	}
}

// drain discards stdout nobody reads, so the process never blocks on a full pipe.
func (p *Process) drain() {
	for range p.lines {
	}
}

// Stop sends SIGTERM, waits StopTimeout, then kills. It returns the exit error (nil for
// status 0) and is safe to call more than once.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		_ = p.Wait(StopTimeout)
	})
	<-p.exited
	return p.err
}

// Stderr is everything the process wrote to stderr so far.
func (p *Process) Stderr() string { return p.stderr.String() }

// lockedBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
