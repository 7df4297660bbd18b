// Package cli implements the sema command line: one file per subcommand.
// It is the only place (with cmd/sema) that reads environment variables.
//
// Where output goes: a command's result on standard output (tables, JSON,
// the lease of "sema run NAME", the version, completion scripts, help asked
// for); messages for people on standard error, one line each, starting with
// "sema CMD: " — the library's and the backends' warnings included, which
// are written as such lines too. Only "sema serve" logs (slog, logfmt, on
// standard error): it is a service, and once it has started every line it
// writes is a log record.
package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/sema-dev/sema/internal/supervise"
)

// Exit codes. A child's own exit status passes through `sema run`
// unchanged (128+N if signal N killed it, as in the shell); these are
// sema's own. exitCodes describes them for the help.
const (
	ExitOK          = 0
	ExitFailure     = 1                         // the command ran but found nothing to act on (e.g. release: nothing held)
	ExitUsage       = supervise.ExitUsage       // bad flags or arguments (EX_USAGE)
	ExitBackend     = supervise.ExitBackend     // backend unreachable or failing (EX_UNAVAILABLE)
	ExitNotAcquired = supervise.ExitNotAcquired // the lock was held: --nonblock or --timeout expired (EX_TEMPFAIL)
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

// command is one subcommand. Its flags are registered by flags, so that
// its help and the shell completion scripts list what its run parses.
type command struct {
	name     string
	summary  string // one line for "sema help"
	synopsis string // "sema run [flags] NAME …"
	help     string // the text between the synopsis and the flags
	hidden   bool   // internal: not listed, not completed
	// interspersed: flags may follow the arguments ("sema status NAME
	// --json"). Not for sema run, whose arguments after NAME are the job's.
	interspersed bool
	// flags registers the command's flags on fs (nil: none, or the command
	// parses its own arguments).
	flags func(fs *flag.FlagSet)
	// args lists the words the command's first argument can be, for the
	// completion scripts (nil: none known).
	args func() []string
	run  func(ctx context.Context, env *Env, args []string) int
}

// commands is the explicit table of subcommands (no init registration),
// in the order "sema help" lists them.
func commands() []*command {
	return []*command{runCommand(), lsCommand(), statusCommand(), releaseCommand(), gcCommand(), serveCommand(),
		benchCommand(), helpCommand(), completionCommand(), versionCommand(),
		superviseCommand(), contendWorkerCommand()}
}

// lookup returns the command called name, or nil.
func lookup(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

// Main runs the sema command line with args (without the program name) and
// returns the exit code.
func Main(args []string) int {
	supervise.NoteIgnored()
	routeRedisLog(slog.New(slog.DiscardHandler))
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
	if len(args) == 0 {
		usage(env.Stderr)
		return ExitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(env.Stdout)
		return ExitOK
	case "-version", "--version", "-V":
		return printVersion(env.Stdout)
	}
	if c := lookup(args[0]); c != nil {
		return c.run(ctx, env, args[1:])
	}
	fmt.Fprintf(env.Stderr, "sema: unknown command %q (see 'sema help')\n", args[0])
	return ExitUsage
}

// usage lists the commands and the help topics.
func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sema COMMAND [flags] [args]\n\ncommands:")
	for _, c := range commands() {
		if !c.hidden {
			fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprintln(w, "\nhelp topics:")
	for _, t := range topics() {
		fmt.Fprintf(w, "  %-10s %s\n", t.name, t.summary)
	}
	fmt.Fprintln(w, "\nRun 'sema help COMMAND' (or 'sema COMMAND --help') for a command's flags, 'sema help TOPIC' for a topic.")
}

// printHelp prints the command's synopsis, help text and flags.
func (c *command) printHelp(w io.Writer) {
	fs := c.newFlagSet()
	if c.flags != nil {
		c.flags(fs)
	}
	c.printUsage(w, fs)
}

// printUsage prints the command's synopsis, help text and the flags of fs.
func (c *command) printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n", c.synopsis)
	if c.help != "" {
		fmt.Fprint(w, c.help)
	} else {
		fmt.Fprintf(w, "\n%s.\n", upperFirst(c.summary))
	}
	if hasFlags(fs) {
		fmt.Fprintln(w, "\nflags:")
		printFlags(w, fs)
	}
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
