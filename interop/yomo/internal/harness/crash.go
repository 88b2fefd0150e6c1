package harness

import (
	"time"
)

// Crasher is implemented by routers that can crash: stop without a word to their clients
// and be started again at once on the same address, as a supervisor restarts a killed
// process.
type Crasher interface {
	// CrashRestart kills the router (y3: SIGKILL; YoMo: its socket closed, as a killed
	// `yomo serve`), starts it again on the same address with the same options (y3: the
	// same state directory) and returns the moments the old one was gone and the new one
	// listened.
	CrashRestart() (killed, listening time.Time)
}

// Kill sends SIGKILL and waits for the process to exit.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	go p.drain()
	<-p.exited
}

func (r *y3Router) CrashRestart() (killed, listening time.Time) {
	r.t.Helper()
	r.mu.Lock()
	p, addr := r.proc, r.addr
	r.proc = nil
	r.mu.Unlock()
	if p != nil {
		p.Kill()
	}
	killed = time.Now()
	r.start(addr)
	return killed, time.Now()
}

func (r *yomoRouter) CrashRestart() (killed, listening time.Time) {
	r.t.Helper()
	addr := r.Addr()
	r.Stop()
	killed = time.Now()
	r.start(addr)
	return killed, time.Now()
}

// Counter sums the series of the Prometheus counter name (e.g.
// `y3_router_skipped_frames_total`) of a running y3 router.
func (r *y3Router) Counter(name string) (int, error) {
	return r.Metric(name)
}

// Counters is implemented by routers with Prometheus counters (y3).
type Counters interface {
	// Counter sums the series of the counter name.
	Counter(name string) (int, error)
}

var (
	_ Crasher  = (*y3Router)(nil)
	_ Crasher  = (*yomoRouter)(nil)
	_ Counters = (*y3Router)(nil)
)
