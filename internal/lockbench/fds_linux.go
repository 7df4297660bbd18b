package lockbench

import (
	"os"

	"golang.org/x/sys/unix"
)

// growFDTable makes the process's file descriptor table hold at least n
// descriptors before the runs start (up to RLIMIT_NOFILE).
//
// The workers of sema bench pivot stand for separate processes, each with
// its own small descriptor table, but they share this process's one. Linux
// grows a table shared by several threads by copying it and waiting for an
// RCU grace period (synchronize_rcu, milliseconds on a busy host) inside
// open(2): a cost of the simulation, not of either lock, that would land
// in the measured waits whenever the workers' open files together cross a
// power of two. A table only grows, so growing it once here removes that.
func growFDTable(n int) {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) != nil {
		return
	}
	n = min(n, int(min(lim.Cur, 1<<20)))
	if n < 2 {
		return
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		return
	}
	defer f.Close()
	if unix.Dup3(int(f.Fd()), n-1, unix.O_CLOEXEC) == nil {
		unix.Close(n - 1)
	}
}
