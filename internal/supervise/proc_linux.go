package supervise

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

// groupMembers counts the live processes of the process group pgid other
// than those whose PIDs are in except.
func groupMembers(pgid int, except ...int) int {
	d, err := os.Open("/proc")
	if err != nil {
		return -1
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return -1
	}
	n := 0
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		if pid, err := strconv.Atoi(name); err != nil || slices.Contains(except, pid) {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		state, pg, ok := parseStat(b)
		if ok && pg == pgid && state != 'Z' && state != 'X' {
			n++
		}
	}
	return n
}

// groupAlive reports whether any process of the process group pgid is still
// running. Zombies (dead, not yet reaped by their parent) do not count: they
// run no code and hold no resources but their PID.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	// kill(2) also counts zombies: look for a live member in /proc.
	return groupMembers(pgid) != 0
}

// parseStat extracts the state and process group from /proc/PID/stat:
// "pid (comm) state ppid pgrp ...", where comm may hold spaces and parens.
func parseStat(b []byte) (state byte, pgrp int, ok bool) {
	state, _, pgrp, ok = parseStatParent(b)
	return state, pgrp, ok
}

// parseStatParent also returns the parent PID.
func parseStatParent(b []byte) (state byte, ppid, pgrp int, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, 0, false
	}
	pp, err1 := strconv.Atoi(string(f[1]))
	pg, err2 := strconv.Atoi(string(f[2]))
	if err1 != nil || err2 != nil {
		return 0, 0, 0, false
	}
	return f[0][0], pp, pg, true
}

// waitGroupGone polls until the group has no live process or timeout
// passes (timeout ≤ 0: no limit). It reports whether the group is gone.
func waitGroupGone(pgid int, timeout time.Duration) bool {
	start := time.Now()
	delay := time.Millisecond
	for groupAlive(pgid) {
		if timeout > 0 && time.Since(start) > timeout {
			return false
		}
		time.Sleep(delay)
		delay = min(delay*2, 50*time.Millisecond)
	}
	return true
}

// killGroup sends sig to the process group pgid, ignoring a group that is
// already gone.
func killGroup(pgid int, sig syscall.Signal) {
	if pgid > 1 {
		_ = syscall.Kill(-pgid, sig)
	}
}

// tcgetpgrp returns the foreground process group of the terminal fd.
func tcgetpgrp(fd int) (int, error) {
	var pg int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pg))); e != 0 {
		return 0, e
	}
	return int(pg), nil
}

// tcsetpgrp makes pgid the foreground process group of the terminal fd. The
// caller must ignore SIGTTOU if it may be in a background group.
func tcsetpgrp(fd, pgid int) error {
	pg := int32(pgid)
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&pg))); e != 0 {
		return e
	}
	return nil
}

// inForeground reports whether stdin is this process's controlling terminal
// and its process group is the terminal's foreground group.
func inForeground() bool {
	fg, err := tcgetpgrp(0)
	return err == nil && fg == syscall.Getpgrp()
}

// shouldTakeTerminal reports whether the job should get the terminal, as a
// shell would give it to a foreground job: we are in the foreground group,
// and nobody else in it could want the terminal meanwhile. Our ancestors do
// not count: a shell without job control ("sh -c 'sema run …'", cron, make)
// leaves us in its own group and only waits for us. Anyone else does: the
// other stages of a pipeline such as "sema run x -- cmd | less".
func shouldTakeTerminal() bool {
	if !inForeground() {
		return false
	}
	return groupMembers(syscall.Getpgrp(), append(ancestors(), os.Getpid())...) == 0
}

// ancestors returns the PIDs of our parent, its parent, and so on up to
// init (or as far as /proc lets us see).
func ancestors() []int {
	var pids []int
	for pid := os.Getppid(); pid > 1 && len(pids) < 1024; {
		pids = append(pids, pid)
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			break
		}
		_, ppid, _, ok := parseStatParent(b)
		if !ok {
			break
		}
		pid = ppid
	}
	return pids
}
