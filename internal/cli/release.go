package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/human"
)

const releaseSynopsis = "sema release --force [--lease ID] NAME"

// releaseCmd force-releases leases: an admin tool, audited on stderr.
var releaseCmd = &command{
	name:    "release",
	summary: "force-release a semaphore's leases (admin)",
	run: func(ctx context.Context, env *Env, args []string) int {
		fs := newFlagSet("release", releaseSynopsis, env.Stderr)
		backend := backendFlag(fs)
		force := fs.Bool("force", false, "required: end leases held by someone else (their jobs are terminated by sema run)")
		id := fs.String("lease", "", "release only the lease with this `ID` (see sema status); default: every holder")
		if code, done := parseFlags(fs, args); done {
			return code
		}
		if fs.NArg() != 1 {
			fmt.Fprintf(env.Stderr, "sema release: need exactly one NAME\nusage: %s\n", releaseSynopsis)
			return ExitUsage
		}
		if !*force {
			fmt.Fprintf(env.Stderr, "sema release: releasing leases you do not hold needs --force (a holder's own sema run releases its lease when its command ends)\nusage: %s\n", releaseSynopsis)
			return ExitUsage
		}
		name := fs.Arg(0)
		if err := sema.ValidateName(name); err != nil {
			fmt.Fprintf(env.Stderr, "sema release: %s\n", errMessage(err))
			return ExitUsage
		}
		if *id != "" {
			if err := sema.ValidateID(*id); err != nil {
				fmt.Fprintf(env.Stderr, "sema release: --lease: %s\n", errMessage(err))
				return ExitUsage
			}
		}
		c, code := openClient(ctx, env, *backend)
		if c == nil {
			return code
		}
		defer c.Close()
		hs, err := c.ForceRelease(ctx, name, *id)
		for _, h := range hs {
			fmt.Fprintf(env.Stdout, "released %q lease %s (owner %s, token %d, weight %d, held for %s)\n",
				human.Line(name), h.ID, human.Line(h.Owner), h.Token, h.Weight, human.Age(h.AcquiredAt))
		}
		switch {
		case errors.Is(err, sema.ErrNotHeld) && *id != "":
			fmt.Fprintf(env.Stderr, "sema release: %q has no lease %s: nothing released\n", human.Line(name), *id)
			return ExitFailure
		case errors.Is(err, sema.ErrNotHeld):
			fmt.Fprintf(env.Stderr, "sema release: %q is not held: nothing released\n", human.Line(name))
			return ExitFailure
		case err != nil:
			fmt.Fprintf(env.Stderr, "sema release: %s\n", errMessage(err))
			return exitCodeFor(err)
		case len(hs) == 0:
			fmt.Fprintf(env.Stderr, "sema release: %q is not held: nothing released\n", human.Line(name))
			return ExitFailure
		}
		return ExitOK
	},
}
