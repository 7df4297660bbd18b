// Package supervise runs a command while holding a lease, as sema run does:
// the front (the process the user started) and the supervisor (the process
// that holds the lease and is the parent of the job). See supervisor_linux.go
// for who does what when a process dies.
package supervise

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sema-dev/sema"
)

// Config is one run: the lease to take and the command to run under it.
type Config struct {
	Name    string
	Limit   int64
	Weight  int64
	TTL     time.Duration
	Wait    time.Duration // how long to wait for the permits; < 0: forever, 0: not at all
	Owner   string        // "" → USER@host:pid PROG
	User    string        // the user's login name, for the default owner label
	MaxHold time.Duration // 0: none
	Grace   time.Duration // SIGTERM → SIGKILL when the job must die
	Margin  time.Duration // the lease's safety margin
	Cmd     []string
}

// Stdio is the front's standard input and outputs, which the job inherits.
type Stdio struct {
	In, Out, Err *os.File
}

// Opener opens the client the supervisor takes its lease with. It reports
// its own failures on msgs and returns the exit code to use then (c nil).
type Opener func(ctx context.Context, msgs io.Writer, log *slog.Logger) (c *sema.Client, code int)

// Command is the hidden subcommand the front re-executes the binary as:
// "sema Command -fg=BOOL -backend URL -- RUN-ARGS...", with the two pipes
// described in supervisor_linux.go as descriptors 3 and 4.
const Command = "__supervise"

// Exit codes of sema run's own. A job's own exit status passes through
// unchanged (128+N if signal N killed it, as in the shell).
const (
	ExitUsage       = 64  // bad flags or arguments (EX_USAGE)
	ExitBackend     = 69  // backend unreachable or failing (EX_UNAVAILABLE)
	ExitInternal    = 70  // a bug (EX_SOFTWARE)
	ExitNotAcquired = 75  // the lock was held: --no-wait or --wait expired (EX_TEMPFAIL)
	ExitLeaseLost   = 76  // the lease was lost while the command ran
	ExitCannotExec  = 126 // the command exists but cannot be executed (as in the shell)
	ExitNotFound    = 127 // the command was not found (as in the shell)
)

// ExitCode maps an error of the library or a backend to an exit code.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, sema.ErrInvalidArgument), errors.Is(err, sema.ErrInvalidName), errors.Is(err, sema.ErrLimitMismatch):
		return ExitUsage
	case errors.Is(err, sema.ErrNotAcquired):
		return ExitNotAcquired
	case errors.Is(err, sema.ErrLeaseLost):
		return ExitLeaseLost
	case errors.Is(err, sema.ErrNotHeld):
		return 1
	}
	return ExitBackend
}

// forwarded are the signals sema run passes on to its job.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// startIgnored holds the signals this process inherited as ignored (nohup,
// "cmd &" in a script without job control). They stay ignored: sema run
// neither catches nor forwards them, and its job inherits them ignored.
var startIgnored = map[os.Signal]bool{}

// NoteIgnored records which forwarded signals this process started with
// ignored. Call it first thing in main, before any signal.Notify.
func NoteIgnored() {
	for _, s := range forwarded {
		if signal.Ignored(s) {
			startIgnored[s] = true
		}
	}
}

// Catchable returns the signals of sigs that were not ignored at start.
func Catchable(sigs ...os.Signal) []os.Signal {
	var out []os.Signal
	for _, s := range sigs {
		if !startIgnored[s] {
			out = append(out, s)
		}
	}
	return out
}
