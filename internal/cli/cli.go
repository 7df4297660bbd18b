// Package cli implements the sema command line: one file per subcommand.
// It is the only place (with cmd/sema) that reads environment variables.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/sema-dev/sema/internal/supervise"
)

// Exit codes. A child's own exit status passes through `sema run`
// unchanged (128+N if signal N killed it, as in the shell); these are
// sema's own.
const (
	ExitOK          = 0
	ExitFailure     = 1                         // the command ran but found nothing to act on (e.g. release: nothing held)
	ExitUsage       = supervise.ExitUsage       // bad flags or arguments (EX_USAGE)
	ExitBackend     = supervise.ExitBackend     // backend unreachable or failing (EX_UNAVAILABLE)
	ExitNotAcquired = supervise.ExitNotAcquired // the lock was held: --no-wait or --wait expired (EX_TEMPFAIL)
	ExitLeaseLost   = supervise.ExitLeaseLost   // the lease was lost while the command ran
	ExitInternal    = supervise.ExitInternal    // a bug (EX_SOFTWARE)
	ExitCannotExec  = supervise.ExitCannotExec  // sema run: the command exists but cannot be executed (as in the shell)
	ExitNotFound    = supervise.ExitNotFound    // sema run: the command was not found (as in the shell)
)

// Env is what a command sees of the outside world.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
}

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *Env, args []string) int
	hidden  bool // internal: not listed by 'sema help'
}

// commands is the explicit table of subcommands (no init registration).
func commands() []*command {
	return []*command{versionCmd, runCmd, lsCmd, statusCmd, releaseCmd, serveCmd, benchCmd, superviseCmd, contendWorkerCmd}
}

// Main runs the sema command line with args (without the program name) and
// returns the exit code.
func Main(args []string) int {
	supervise.NoteIgnored()
	ctx, stop := context.Background(), func() {}
	if sigs := supervise.Catchable(os.Interrupt, syscall.SIGTERM); len(sigs) > 0 {
		ctx, stop = signal.NotifyContext(ctx, sigs...)
	}
	defer stop()
	env := &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	return Run(ctx, env, args)
}

// Run dispatches args to a subcommand.
func Run(ctx context.Context, env *Env, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(env.Stderr)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, env, args[1:])
		}
	}
	fmt.Fprintf(env.Stderr, "sema: unknown command %q (see 'sema help')\n", args[0])
	return ExitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sema <command> [flags] [args]\n\ncommands:")
	cs := commands()
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		if c.hidden {
			continue
		}
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'sema <command> -h' for a command's flags.")
}
