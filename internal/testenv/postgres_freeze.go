package testenv

import (
	"os"
	"strconv"
	"syscall"

	"github.com/sema-dev/sema/internal/supervise"
)

// Freeze stops the server and every process it started for its
// connections with SIGSTOP, so that it accepts connections but answers
// nothing; Thaw continues them.
func (p *Postgres) Freeze() { p.signalTree(syscall.SIGSTOP) }

// Thaw continues a frozen server.
func (p *Postgres) Thaw() { p.signalTree(syscall.SIGCONT) }

// signalTree sends sig to the process and to its children (PostgreSQL's
// children each start a session of their own, so its process group does
// not name them).
func (p *Proc) signalTree(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	pid := p.cmd.Process.Pid
	_ = syscall.Kill(pid, sig)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if _, ppid, _, ok := supervise.ParseStatParent(b); ok && ppid == pid {
			_ = syscall.Kill(child, sig)
		}
	}
}
