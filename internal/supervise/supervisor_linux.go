package supervise

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sema-dev/sema/internal/human"
)

// The supervisor is the process that holds the lease and is the parent of
// the job. sema run (the front) starts it in a process group of its own, so
// that killing the front — even with SIGKILL, even its whole process group —
// leaves the supervisor alive to terminate the job and only then give the
// permits back. What dies, and what happens then:
//
//   - the front: the supervisor sees EOF on its pipe, sends the job's group
//     SIGTERM, SIGKILL after the grace, waits until no process of the group
//     runs, then releases. The lease stays held (and renewed) meanwhile, on
//     every backend.
//   - the supervisor: the job's leader gets SIGKILL (Pdeathsig); the front
//     sees EOF, SIGKILLs the group and waits for it. The lease is gone with
//     the supervisor (at once on file://, at its TTL elsewhere): on file://
//     the group outlives it by the time the front needs to kill it.
//   - the lease (expiry, force-release, max hold): SIGTERM, then SIGKILL
//     after the grace ≤ margin/2, so the job is dead before the backend can
//     grant the permits to anyone else.
//
// They talk over two pipes:
//
//	fd 3, front → supervisor: one byte per command: a signal number to
//	      forward to the job's group, or ctlCont. EOF: the front is gone.
//	fd 4, supervisor → front: lines "pgid N", "stop N" (the job stopped on
//	      signal N), "msg TEXT" (for the front to print), "exit N".
const (
	fdCtl    = 3
	fdStatus = 4
	ctlCont  = byte(0xFF) // the front was continued: continue the job
)

// Supervise is the supervisor process of a run: it takes the lease through
// open, runs the job and reports to the front, whose pipes it finds as
// descriptors 3 and 4. fg says whether the job gets the terminal. It
// returns the exit code, which it has also sent to the front.
func Supervise(cfg Config, fg bool, open Opener) int {
	ctl, status, err := supervisorPipes()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sema %s: internal command of sema run, not for direct use (%v)\n", Command, err)
		return ExitUsage
	}
	// The job's orphans become the supervisor's children: it sees whether
	// any process of the job still runs without searching /proc.
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	out := newStatusWriter(status)
	s := &supervisor{cfg: cfg, fg: fg, out: out, open: open}
	code := s.run(ctl)
	out.send(fmt.Sprintf("exit %d", code))
	out.close(time.Second)
	return code
}

// supervisorPipes returns the pipes the front passed as fds 3 and 4, made
// close-on-exec so that the job does not inherit them.
func supervisorPipes() (ctl, status *os.File, err error) {
	for _, fd := range []int{fdCtl, fdStatus} {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return nil, nil, fmt.Errorf("fd %d: %w", fd, err)
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
			return nil, nil, fmt.Errorf("fd %d is not a pipe", fd)
		}
		syscall.CloseOnExec(fd)
	}
	return os.NewFile(fdCtl, "ctl"), os.NewFile(fdStatus, "status"), nil
}

// statusWriter sends lines to the front without ever blocking the
// supervisor: a stopped or dead front must not stall the job's supervision.
type statusWriter struct {
	f    *os.File
	ch   chan string
	done chan struct{}
}

func newStatusWriter(f *os.File) *statusWriter {
	w := &statusWriter{f: f, ch: make(chan string, 64), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for line := range w.ch {
			if _, err := io.WriteString(f, line+"\n"); err != nil {
				for range w.ch { // the front is gone: drain
				}
				return
			}
		}
	}()
	return w
}

// send queues a line; it drops the line if the queue is full.
func (w *statusWriter) send(line string) {
	select {
	case w.ch <- line:
	default:
	}
}

// msg queues a message for the front to print on its stderr.
func (w *statusWriter) msg(format string, args ...any) {
	w.send("msg sema run: " + human.Line(fmt.Sprintf(format, args...)))
}

// Write makes a statusWriter a log destination: each line becomes a msg.
func (w *statusWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.send("msg " + human.Line(line))
	}
	return len(p), nil
}

// close flushes the queue for at most timeout.
func (w *statusWriter) close(timeout time.Duration) {
	close(w.ch)
	select {
	case <-w.done:
	case <-time.After(timeout):
	}
	w.f.Close()
}

func (w *statusWriter) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelError}))
}

// supervisorSignals catches the signals the supervisor forwards when sent to
// it directly, plus SIGPIPE (a write to a closed stderr must not kill it).
// Caught signals are reset to their default in the job; signals ignored at
// start stay ignored, in the job too.
func supervisorSignals() (chan os.Signal, func()) {
	ch := make(chan os.Signal, 8)
	signal.Notify(ch, append(Catchable(forwarded...), syscall.SIGPIPE)...)
	return ch, func() { signal.Stop(ch) }
}
