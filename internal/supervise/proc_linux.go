package supervise

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
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
// run no code and hold no resources but their PID. Called by a child
// subreaper whose children are the job's processes only (the supervisor,
// and the front once its supervisor is gone).
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	// kill(2) also counts zombies, and the job's leader stays one until the
	// group is gone. A child subreaper inherits every orphan below it: a
	// live process of the job is a live child, or has one as an ancestor.
	// Without any, no process of the job runs; else look in all of /proc.
	if n, ok := liveChildren(); ok && n == 0 {
		return false
	}
	return groupMembers(pgid) != 0
}

// liveChildren counts this process's children that are not zombies, as
// /proc/self/task/*/children lists them; ok is false if it cannot tell.
func liveChildren() (n int, ok bool) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, false
	}
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) { // the thread exited meanwhile
				continue
			}
			return 0, false
		}
		for _, pid := range strings.Fields(string(b)) {
			st, err := os.ReadFile("/proc/" + pid + "/stat")
			if err != nil {
				continue // reaped meanwhile
			}
			if state, _, ok := parseStat(st); !ok || state != 'Z' && state != 'X' {
				n++
			}
		}
	}
	return n, true
}

// startProcess starts argv[0] as path with env, the descriptors of files
// as 0, 1, 2…, and sys. It returns the child's PID; the caller reaps it.
func startProcess(path string, argv, env []string, files []*os.File, sys *syscall.SysProcAttr) (int, error) {
	fds := make([]uintptr, len(files))
	for i, f := range files {
		fds[i] = f.Fd()
	}
	pid, _, err := syscall.StartProcess(path, argv, &syscall.ProcAttr{Env: env, Files: fds, Sys: sys})
	runtime.KeepAlive(files)
	return pid, err
}

// reap waits for the child pid to end and returns its status.
func reap(pid int) syscall.WaitStatus {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if !errors.Is(err, syscall.EINTR) {
			if err != nil {
				return syscall.WaitStatus(0xff << 8) // exit 255: cannot happen for our own child
			}
			return ws
		}
	}
}

// describe says how a child ended, as the shell would.
func describe(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "signal: " + ws.Signal().String()
	}
	return "exit status " + strconv.Itoa(ws.ExitStatus())
}

// parseStat extracts the state and process group from /proc/PID/stat:
// "pid (comm) state ppid pgrp ...", where comm may hold spaces and parens.
func parseStat(b []byte) (state byte, pgrp int, ok bool) {
	state, _, pgrp, ok = ParseStatParent(b)
	return state, pgrp, ok
}

// ParseStatParent reads a /proc/PID/stat as parseStat does, and also
// returns the parent PID.
func ParseStatParent(b []byte) (state byte, ppid, pgrp int, ok bool) {
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
		_, ppid, _, ok := ParseStatParent(b)
		if !ok {
			break
		}
		pid = ppid
	}
	return pids
}
