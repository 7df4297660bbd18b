package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/supervise"
)

// runCommand runs a command while holding permits of a semaphore.
func runCommand() *command {
	c := &command{
		name:     "run",
		summary:  "run a command while holding a lock or semaphore permits",
		synopsis: runSynopsis,
		help:     runHelp,
		flags:    func(fs *flag.FlagSet) { new(runConfig).register(fs) },
	}
	c.run = func(_ context.Context, env *Env, args []string) int {
		var cfg runConfig
		rest, code, done := c.parse(env, args, cfg.register)
		if done {
			return code
		}
		if _, err := parseRunArgs(rest, cfg); err != nil {
			fmt.Fprintf(env.Stderr, "sema run: %s\n", errMessage(err))
			return ExitUsage
		}
		in, ok1 := env.Stdin.(*os.File)
		out, ok2 := env.Stdout.(*os.File)
		errf, ok3 := env.Stderr.(*os.File)
		if !ok1 || !ok2 || !ok3 {
			fmt.Fprintln(env.Stderr, "sema run: standard input and outputs must be files, for the command to inherit them")
			return ExitInternal
		}
		// The supervisor parses args again and opens the backend itself.
		return supervise.Front(supervise.Stdio{In: in, Out: out, Err: errf}, "", args)
	}
	return c
}

// superviseCommand is the hidden subcommand sema run re-executes itself as.
func superviseCommand() *command {
	c := &command{
		name:    supervise.Command,
		summary: "internal: the supervisor process of sema run",
		hidden:  true,
	}
	c.run = func(_ context.Context, env *Env, args []string) int {
		fs := c.newFlagSet()
		fg := fs.Bool("fg", false, "give the job the terminal")
		backend := fs.String("backend", "", "backend URL")
		if err := fs.Parse(args); err != nil {
			fmt.Fprintf(env.Stderr, "sema %s: internal command of sema run, not for direct use\n", supervise.Command)
			return ExitUsage
		}
		cfg, err := parseRun(fs.Args())
		if err != nil {
			fmt.Fprintf(env.Stderr, "sema %s: %s\n", supervise.Command, errMessage(err))
			return ExitUsage
		}
		if *backend != "" {
			cfg.backend = *backend
		}
		open := func(ctx context.Context, msgs io.Writer, _ *slog.Logger) (*sema.Client, int) {
			// Warnings at error level only: sema run reports lease losses itself.
			return openClient(ctx, msgs, "run", cfg.backend, slog.LevelError)
		}
		sc := cfg.supervise()
		sc.User = loginName(env.Getenv)
		return supervise.Supervise(sc, *fg, open)
	}
	return c
}

// loginName is the user's login name as the environment gives it (login,
// cron and sshd set $LOGNAME and $USER), else the user ID.
func loginName(getenv func(string) string) string {
	for _, k := range []string{"LOGNAME", "USER"} {
		if v := getenv(k); v != "" {
			return v
		}
	}
	return "uid" + strconv.Itoa(os.Getuid())
}

// supervise is the run as the supervisor needs it.
func (c runConfig) supervise() supervise.Config {
	return supervise.Config{Name: c.name, Limit: c.limit, Weight: c.weight, TTL: c.ttl, Wait: c.wait, Owner: c.owner,
		MaxHold: c.maxHold, Grace: c.grace, Margin: c.margin, Cmd: c.cmd, NotAcquiredExit: c.conflict, Quiet: c.quiet}
}
