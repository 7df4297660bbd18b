package supervise

import (
	"bufio"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Front is sema run as the user sees it: it starts the supervisor (which
// takes the lease on backendURL and runs the job), forwards signals to it,
// prints its messages and exits with its code. If the supervisor dies
// abnormally it kills the job's group itself. runArgs are sema run's own
// arguments, which the supervisor parses again.
func Front(env Stdio, backendURL string, runArgs []string) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(env.Err, "sema run: cannot find the sema executable: %v\n", err)
		return ExitInternal
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(env.Err, "sema run: %v\n", err)
		return ExitInternal
	}
	defer ctlW.Close()
	stR, stW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		fmt.Fprintf(env.Err, "sema run: %v\n", err)
		return ExitInternal
	}
	defer stR.Close()

	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, append(Catchable(forwarded...), syscall.SIGPIPE)...)
	defer signal.Stop(sigs)

	// As a child subreaper, sema run inherits the job's processes if the
	// supervisor dies, so it can find and kill them even if it never
	// learned the job's process group.
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	fg := shouldTakeTerminal()
	argv := append([]string{self, Command, "-fg=" + strconv.FormatBool(fg), "-backend", backendURL, "--"}, runArgs...)
	// A group of its own: killing sema run's group leaves it alive to clean up.
	pid, err := startProcess(self, argv, os.Environ(), []*os.File{env.In, env.Out, env.Err, ctlR, stW}, // ctl and status: fds 3 and 4
		&syscall.SysProcAttr{Setpgid: true})
	ctlR.Close()
	stW.Close()
	if err != nil {
		fmt.Fprintf(env.Err, "sema run: starting the supervisor: %v\n", err)
		return ExitInternal
	}
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stR)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	waited := make(chan syscall.WaitStatus, 1)
	go func() { waited <- reap(pid) }()

	f := &front{env: env, ctl: ctlW, fg: fg, code: -1}
	var ws syscall.WaitStatus
	for running := true; running; {
		select {
		case sig := <-sigs:
			if s, ok := sig.(syscall.Signal); ok && s != syscall.SIGPIPE {
				_, _ = ctlW.Write([]byte{byte(s)})
			}
		case line, ok := <-lines:
			if !ok {
				lines = nil
				continue
			}
			f.handle(line)
		case ws = <-waited:
			running = false
		}
	}
	if lines != nil {
		for line := range lines { // the supervisor exited: read what it said last
			f.handle(line)
		}
	}
	if fg {
		takeTerminal(syscall.Getpgrp())
	}
	if f.code >= 0 {
		return f.code
	}
	// The supervisor died without finishing: its lease is gone or going.
	fmt.Fprintf(env.Err, "sema run: the supervisor died (%s)\n", describe(ws))
	killOrphans(f.pgid)
	fmt.Fprintln(env.Err, "sema run: the job was killed")
	return ExitLeaseLost
}

// killOrphans kills the job after its supervisor died: the group pgid if
// known, and the groups of every process reparented to sema run (its child
// subreaper), until none of them runs. It reaps what it kills.
func killOrphans(pgid int) {
	delay := time.Millisecond
	for {
		groups := orphanGroups()
		if pgid > 0 && groupAlive(pgid) {
			groups = append(groups, pgid)
		}
		for _, g := range groups {
			killGroup(g, syscall.SIGKILL)
		}
		for { // reap the orphans (never the supervisor: it is reaped already)
			if wpid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil); wpid <= 0 || err != nil {
				break
			}
		}
		if len(groups) == 0 {
			return
		}
		time.Sleep(delay)
		delay = min(delay*2, 50*time.Millisecond)
	}
}

// orphanGroups returns the process groups of sema run's live children.
func orphanGroups() []int {
	self := os.Getpid()
	names, _ := os.ReadDir("/proc")
	var groups []int
	for _, e := range names {
		name := e.Name()
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		state, ppid, pgrp, ok := ParseStatParent(b)
		if ok && ppid == self && state != 'Z' && state != 'X' && pgrp > 1 && pgrp != syscall.Getpgrp() {
			groups = append(groups, pgrp)
		}
	}
	return groups
}

// front is the state sema run keeps about its supervisor.
type front struct {
	env  Stdio
	ctl  *os.File
	fg   bool
	pgid int // the job's process group, once started
	code int // the supervisor's final code; -1 until it says
}

func (f *front) handle(line string) {
	kind, arg, _ := strings.Cut(line, " ")
	switch kind {
	case "msg":
		fmt.Fprintln(f.env.Err, arg)
	case "pgid":
		f.pgid, _ = strconv.Atoi(arg)
	case "exit":
		if n, err := strconv.Atoi(arg); err == nil {
			f.code = n
		}
	case "stop":
		if f.fg && f.pgid > 0 {
			f.stopped()
		}
	}
}

// stopped mirrors a job stopped at the terminal (^Z): take the terminal
// back and stop ourselves, so the shell sees sema run stopped; when the
// shell continues us, give the job the terminal again (if we are in the
// foreground) and continue it.
func (f *front) stopped() {
	takeTerminal(syscall.Getpgrp())
	_ = syscall.Kill(os.Getpid(), syscall.SIGTSTP)
	// Here after SIGCONT (fg or bg).
	if inForeground() {
		takeTerminal(f.pgid)
	}
	_, _ = f.ctl.Write([]byte{ctlCont})
}

// takeTerminal makes pgid the terminal's foreground group, from a process
// that may be in the background (SIGTTOU ignored for the call only, so that
// no child inherits the ignored disposition).
func takeTerminal(pgid int) {
	signal.Ignore(syscall.SIGTTOU)
	_ = tcsetpgrp(0, pgid)
	signal.Reset(syscall.SIGTTOU)
}
