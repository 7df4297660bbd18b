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

// runCmd runs a command while holding permits of a semaphore.
var runCmd = &command{
	name:    "run",
	summary: "run a command while holding a lock or semaphore permits",
	run: func(_ context.Context, env *Env, args []string) int {
		cfg, help, err := parseRunArgs(args, env.Stderr)
		if help {
			return ExitOK
		}
		if err != nil {
			fmt.Fprintf(env.Stderr, "sema run: %s\n", errMessage(err))
			return ExitUsage
		}
		rawURL, dir, err := resolveBackend(cfg.backend, env.Getenv)
		if err != nil {
			fmt.Fprintf(env.Stderr, "sema run: %s\n", errMessage(err))
			return ExitUsage
		}
		if dir != "" {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				fmt.Fprintf(env.Stderr, "sema run: default lock directory: %v\n", err)
				return ExitBackend
			}
		}
		in, ok1 := env.Stdin.(*os.File)
		out, ok2 := env.Stdout.(*os.File)
		errf, ok3 := env.Stderr.(*os.File)
		if !ok1 || !ok2 || !ok3 {
			fmt.Fprintln(env.Stderr, "sema run: standard input and outputs must be files, for the command to inherit them")
			return ExitInternal
		}
		return supervise.Front(supervise.Stdio{In: in, Out: out, Err: errf}, rawURL, args)
	},
}

// superviseCmd is the hidden subcommand sema run re-executes itself as.
var superviseCmd = &command{
	name:    supervise.Command,
	summary: "internal: the supervisor process of sema run",
	hidden:  true,
	run: func(_ context.Context, env *Env, args []string) int {
		fs := flag.NewFlagSet("sema "+supervise.Command, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fg := fs.Bool("fg", false, "give the job the terminal")
		backend := fs.String("backend", "", "backend URL")
		if err := fs.Parse(args); err != nil {
			fmt.Fprintf(env.Stderr, "sema %s: internal command of sema run, not for direct use\n", supervise.Command)
			return ExitUsage
		}
		cfg, _, err := parseRunArgs(fs.Args(), io.Discard)
		if err != nil {
			fmt.Fprintf(env.Stderr, "sema %s: %s\n", supervise.Command, errMessage(err))
			return ExitUsage
		}
		if *backend != "" {
			cfg.backend = *backend
		}
		open := func(ctx context.Context, msgs io.Writer, log *slog.Logger) (*sema.Client, int) {
			return openClient(ctx, &Env{Stderr: msgs, Getenv: env.Getenv}, cfg.backend, sema.WithLogger(log))
		}
		sc := cfg.supervise()
		sc.User = loginName(env.Getenv)
		return supervise.Supervise(sc, *fg, open)
	},
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
		MaxHold: c.maxHold, Grace: c.grace, Margin: c.margin, Cmd: c.cmd}
}
