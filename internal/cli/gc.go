package cli

import (
	"context"
	"fmt"
	"time"
)

const gcSynopsis = "sema gc [--idle DURATION] [--backend URL]"

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

// gcCmd reclaims idle names.
var gcCmd = &command{
	name:    "gc",
	summary: "remove the state of names idle for a while (file://)",
	run: func(ctx context.Context, env *Env, args []string) int {
		fs := newFlagSetHelp("gc", gcSynopsis, gcHelp, env.Stderr)
		backend := backendFlag(fs)
		idle := fs.Duration("idle", 24*time.Hour, "remove names unused for at least this `duration`")
		if code, done := parseFlags(fs, args); done {
			return code
		}
		if fs.NArg() != 0 || *idle < 0 {
			fmt.Fprintf(env.Stderr, "sema gc: no arguments, and a --idle of 0 or more\nusage: %s\n", gcSynopsis)
			return ExitUsage
		}
		c, code := openClient(ctx, env, *backend)
		if c == nil {
			return code
		}
		defer c.Close()
		r, ok := c.Backend().(reclaimer)
		if !ok {
			fmt.Fprintln(env.Stdout, "nothing to reclaim: this backend does not reclaim idle names on request")
			return ExitOK
		}
		n, err := r.Reclaim(ctx, *idle)
		if err != nil {
			fmt.Fprintf(env.Stderr, "sema gc: %s\n", errMessage(err))
			return exitCodeFor(err)
		}
		fmt.Fprintf(env.Stdout, "removed %d idle names\n", n)
		return ExitOK
	},
}
