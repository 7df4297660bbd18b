package supervise

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/human"
)

// supervisor holds the lease and runs the job (see supervisor_linux.go).
type supervisor struct {
	cfg       Config
	fg        bool
	out       *statusWriter
	open      Opener
	cmds      chan byte      // from the front
	frontGone chan struct{}  // closed when the front is gone
	sigs      chan os.Signal // sent to the supervisor itself
}

func (s *supervisor) run(ctl *os.File) int {
	s.cmds, s.frontGone = make(chan byte, 16), make(chan struct{})
	go func() {
		buf := make([]byte, 16)
		for {
			n, err := ctl.Read(buf)
			for _, b := range buf[:n] {
				s.cmds <- b
			}
			if err != nil {
				close(s.frontGone)
				return
			}
		}
	}()
	var stopSigs func()
	s.sigs, stopSigs = supervisorSignals()
	defer stopSigs()

	c, code := s.open(context.Background(), s.out, s.out.logger())
	if c == nil {
		return code
	}
	defer c.Close()
	l, code := s.acquire(c)
	if l == nil {
		return code
	}
	if len(s.cfg.Cmd) == 0 {
		code = s.hold(l)
	} else {
		code = s.runJob(l)
	}
	err := l.Release(context.Background())
	switch {
	case err == nil || code == ExitLeaseLost:
	case errors.Is(err, sema.ErrForceReleased):
		// The job ran to its end before sema run learned: nobody else held
		// the permits meanwhile, but the job was not meant to finish.
		s.out.msg("lease on %q %s before the job ended", s.cfg.Name, lostWhy(err))
		code = ExitLeaseLost
	default:
		s.out.msg("releasing %q: %s", s.cfg.Name, err)
	}
	return code
}

// runJob starts the job, supervises it until its whole process group is
// gone, and returns sema run's exit code.
func (s *supervisor) runJob(l *sema.Lease) int {
	path, err := exec.LookPath(s.cfg.Cmd[0])
	if err != nil {
		s.out.msg("%s", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return ExitNotFound
		}
		return ExitCannotExec
	}
	// Pdeathsig is tied to the forking thread: keep this goroutine on it.
	runtime.LockOSThread()
	pgid, err := startProcess(path, s.cfg.Cmd, jobEnv(os.Environ(), l), []*os.File{os.Stdin, os.Stdout, os.Stderr},
		&syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Foreground: s.fg, Ctty: 0})
	if err != nil {
		s.out.msg("%s", err)
		if errors.Is(err, syscall.ENOENT) {
			return ExitNotFound
		}
		return ExitCannotExec
	}
	if d, err := time.ParseDuration(os.Getenv("SEMA_TEST_PGID_DELAY")); err == nil {
		time.Sleep(d) // tests: widen the window in which sema run does not know the group
	}
	s.out.send(fmt.Sprintf("pgid %d", pgid))
	events := make(chan jobEvent, 1)
	go s.watch(pgid, events)

	var fwd forwarder
	var (
		lost     error
		ended    *jobEvent
		killT    *time.Timer
		killC    <-chan time.Time
		pollC    <-chan time.Time
		poll     = time.Millisecond
		done     = l.Done()
		killing  bool
		stopping = func(why string) {
			if killing {
				return
			}
			killing = true
			if why != "" {
				s.out.msg("%s; terminating the job (SIGTERM, then SIGKILL after %v)", why, s.cfg.Grace)
			}
			killGroup(pgid, syscall.SIGTERM)
			killGroup(pgid, syscall.SIGCONT) // a stopped job must see its SIGTERM
			killT = time.NewTimer(s.cfg.Grace)
			killC = killT.C
		}
	)
loop:
	for {
		select {
		case b := <-s.cmds:
			switch {
			case b == ctlCont:
				killGroup(pgid, syscall.SIGCONT)
			case b > 0 && b <= 64:
				fwd.forward(pgid, syscall.Signal(b))
			}
		case sig := <-s.sigs:
			if sig != syscall.SIGPIPE {
				fwd.forward(pgid, sig.(syscall.Signal))
			}
		case <-s.frontGone:
			s.frontGone = nil
			stopping("") // nobody to tell
		case <-done:
			done = nil
			if ended == nil {
				lost = l.Err()
				stopping(fmt.Sprintf("lease on %q %s", s.cfg.Name, lostWhy(lost)))
			}
		case ev := <-events:
			if !ev.exited {
				s.out.send(fmt.Sprintf("stop %d", ev.stopSig))
				continue
			}
			ended = &ev
			if groupAlive(pgid) {
				stopping("") // leftovers of the group die with the job
			} else {
				break loop // the common case: nothing left to wait for
			}
		case <-killC:
			killGroup(pgid, syscall.SIGKILL)
			killC = nil
		case <-pollC:
			pollC = nil
		}
		if ended != nil && pollC == nil {
			if !groupAlive(pgid) {
				break loop
			}
			pollC = time.After(poll)
			poll = min(2*poll, 50*time.Millisecond)
		}
	}
	if killT != nil {
		killT.Stop()
	}
	status := finish(pgid, *ended)
	if lost != nil {
		s.out.msg("job ended: %s", howEnded(status))
		return ExitLeaseLost
	}
	if err := l.Err(); err != nil && errors.Is(err, sema.ErrLeaseLost) {
		// Lost as the job ended: its work may not have been covered.
		s.out.msg("lease on %q %s as the job ended", s.cfg.Name, lostWhy(err))
		return ExitLeaseLost
	}
	return exitStatus(status)
}

// lostWhy says how a lease was lost: force-released, by whom if the
// backend told (else "by an operator"), or lost and why.
func lostWhy(err error) string {
	var fe *sema.ForcedError
	switch {
	case errors.As(err, &fe):
		return "force-released by " + human.Line(fe.By)
	case errors.Is(err, sema.ErrForceReleased):
		return "force-released by an operator"
	}
	return fmt.Sprintf("lost (%v)", err)
}

// forwarder passes signals on to the job's group, once: when one signal
// reaches both sema run and the supervisor (systemd stopping a unit,
// "pkill sema"), the job gets it once, not twice.
type forwarder struct{ last [65]time.Time }

func (f *forwarder) forward(pgid int, sig syscall.Signal) {
	if sig <= 0 || sig > 64 {
		return
	}
	if now := time.Now(); now.Sub(f.last[sig]) >= 50*time.Millisecond {
		f.last[sig] = now
		killGroup(pgid, sig)
	}
}

// jobEvent is a change of the job leader's state.
type jobEvent struct {
	stopSig syscall.Signal      // stopped by this signal (terminal job control)
	exited  bool                // it ended
	ws      *syscall.WaitStatus // its status, if reaping it was unavoidable
}

// CLD_STOPPED, the si_code of a child stopped by a signal.
const cldStopped = 5

// watch reports the job leader's stops and its end without reaping it: the
// dead leader (a zombie) keeps its PID, the group's ID, reserved, so the
// supervisor's signals to the group cannot reach a process that reused it.
// finish reaps it once the group is gone.
func (s *supervisor) watch(pid int, events chan<- jobEvent) {
	opts := unix.WEXITED | unix.WNOWAIT
	if s.fg {
		opts |= unix.WSTOPPED
	}
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, opts, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || info.Code != cldStopped {
			events <- jobEvent{exited: true}
			return
		}
		var ws syscall.WaitStatus // consume the stop report
		if _, err := syscall.Wait4(pid, &ws, syscall.WUNTRACED|syscall.WNOHANG, nil); err == nil {
			switch {
			case ws.Stopped():
				events <- jobEvent{stopSig: ws.StopSignal()}
			case ws.Exited() || ws.Signaled(): // it died meanwhile: reaped
				events <- jobEvent{exited: true, ws: &ws}
				return
			}
		}
	}
}

// finish reaps the job leader (unless done already) and returns its status.
func finish(pid int, ev jobEvent) syscall.WaitStatus {
	if ev.ws != nil {
		return *ev.ws
	}
	return reap(pid)
}

// howEnded says how a job ended: "terminated by SIGTERM", "exit status 0".
func howEnded(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "terminated by " + unix.SignalName(ws.Signal())
	}
	return fmt.Sprintf("exit status %d", ws.ExitStatus())
}

// exitStatus is the shell's view of a wait status: the exit code, or
// 128+N after signal N.
func exitStatus(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
