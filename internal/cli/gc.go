package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"time"
)

const gcHelp = `
Removes the state of names that nobody has held, waited for or had open
for at least --idle: one file per name on file://, where names used once
(date-stamped job names) would otherwise pile up. Fencing tokens never go
back: a removed name used again gets tokens above every one it had. Safe to
run while jobs use the directory (for example daily from cron); names in
use are left alone. Backends that keep no state per idle name have nothing
to reclaim.
`

// reclaimer is a backend that can remove the state of idle names.
type reclaimer interface {
	Reclaim(ctx context.Context, idle time.Duration) (int, error)
}

// gcCommand reclaims idle names.
func gcCommand() *command {
	c := &command{
		name:         "gc",
		summary:      "remove the state of names idle for a while (file://)",
		synopsis:     "sema gc [--idle DURATION] [--backend URL]",
		help:         gcHelp,
		interspersed: true,
	}
	var backend string
	var idle time.Duration
	register := func(fs *flag.FlagSet) {
		backendFlag(fs, &backend)
		durationVar(fs, &idle, "idle", 24*time.Hour, "remove names unused for at least this `duration` (plain numbers are seconds)")
	}
	c.flags = register
	c.run = func(ctx context.Context, env *Env, args []string) int {
		rest, code, done := c.parse(env, args, register)
		if done {
			return code
		}
		if len(rest) != 0 || idle < 0 {
			fmt.Fprintf(env.Stderr, "sema gc: no arguments, and a --idle of 0 or more (usage: %s)\n", c.synopsis)
			return ExitUsage
		}
		cl, code := openClient(ctx, env.Stderr, "gc", backend, slog.LevelWarn)
		if cl == nil {
			return code
		}
		defer cl.Close()
		r, ok := cl.Backend().(reclaimer)
		if !ok {
			fmt.Fprintln(env.Stdout, "nothing to reclaim: this backend does not reclaim idle names on request")
			return ExitOK
		}
		n, err := r.Reclaim(ctx, idle)
		if err != nil {
			fmt.Fprintf(env.Stderr, "sema gc: %s\n", errMessage(err))
			return exitCodeFor(err)
		}
		fmt.Fprintf(env.Stdout, "removed %d idle names\n", n)
		return ExitOK
	}
	return c
}
