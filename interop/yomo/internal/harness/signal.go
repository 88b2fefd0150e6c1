package harness

import "os"

// Signal sends sig to the process (SIGSTOP and SIGCONT pause and resume it the way a
// stalled host, a long GC pause or a debugger does). It is an error once the process exited.
func (p *Process) Signal(sig os.Signal) error {
	return p.cmd.Process.Signal(sig)
}
