package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/human"
)

// releaseCommand force-releases leases: an admin tool.
func releaseCommand() *command {
	c := &command{
		name:         "release",
		summary:      "force-release a semaphore's leases (admin)",
		synopsis:     "sema release --force [--now] [--lease ID] NAME",
		interspersed: true,
	}
	var backend, id string
	var force, now bool
	register := func(fs *flag.FlagSet) {
		backendFlag(fs, &backend)
		fs.BoolVar(&force, "force", false, "required: end leases held by someone else (their jobs are terminated by sema run)")
		fs.StringVar(&id, "lease", "", "release only the lease with this `ID` (see sema status); default: every holder")
		fs.BoolVar(&now, "now", false, "free the permits at once, for a holder known to be dead (default: they free when the lease expires, as its holder may still run until then)")
	}
	c.flags = register
	c.run = func(ctx context.Context, env *Env, args []string) int {
		rest, code, done := c.parse(env, args, register)
		if done {
			return code
		}
		if len(rest) != 1 {
			fmt.Fprintf(env.Stderr, "sema release: need exactly one NAME (usage: %s)\n", c.synopsis)
			return ExitUsage
		}
		if !force {
			fmt.Fprintf(env.Stderr, "sema release: releasing leases you do not hold needs --force (a holder's own sema run releases its lease when its command ends)\n")
			return ExitUsage
		}
		name := rest[0]
		if err := sema.ValidateName(name); err != nil {
			fmt.Fprintf(env.Stderr, "sema release: %s\n", errMessage(err))
			return ExitUsage
		}
		if id != "" {
			if err := sema.ValidateID(id); err != nil {
				fmt.Fprintf(env.Stderr, "sema release: --lease: %s\n", errMessage(err))
				return ExitUsage
			}
		}
		// Warnings at error level only: the force-release is this command's
		// result, printed below.
		cl, code := openClient(ctx, env.Stderr, "release", backend, slog.LevelError)
		if cl == nil {
			return code
		}
		defer cl.Close()
		opts := []sema.ForceOption{sema.ForceBy(operator(env.Getenv))}
		if now {
			opts = append(opts, sema.ForceNow())
		}
		hs, err := cl.ForceRelease(ctx, name, id, opts...)
		for _, h := range hs {
			fmt.Fprintf(env.Stdout, "released %q lease %s (owner %s, token %d, weight %d, held for %s); %s\n",
				human.Line(name), h.ID, human.Line(h.Owner), h.Token, h.Weight, human.Age(h.AcquiredAt), freesWhen(h, now))
		}
		switch {
		case errors.Is(err, sema.ErrNotHeld) && id != "":
			fmt.Fprintf(env.Stderr, "sema release: %q has no lease %s: nothing released\n", human.Line(name), id)
			return ExitFailure
		case errors.Is(err, sema.ErrNotHeld) || err == nil && len(hs) == 0:
			fmt.Fprintf(env.Stderr, "sema release: %q is not held: nothing released\n", human.Line(name))
			return ExitFailure
		case err != nil:
			fmt.Fprintf(env.Stderr, "sema release: %s\n", errMessage(err))
			return exitCodeFor(err)
		}
		return ExitOK
	}
	return c
}

// freesWhen says when the permits of a force-released holder free.
func freesWhen(h sema.Holder, now bool) string {
	if now || h.ExpiresAt.IsZero() {
		return "its permits are free now"
	}
	left := time.Until(h.ExpiresAt).Round(100 * time.Millisecond)
	if left <= 0 {
		return "its permits are free now"
	}
	return fmt.Sprintf("its permits free at %s (in %v) or when its holder exits, whichever is first",
		h.ExpiresAt.Local().Format(time.TimeOnly), left)
}

// operator is who runs sema release --force, as its holders are told:
// LOGIN@HOST.
func operator(getenv func(string) string) string {
	host, _ := os.Hostname()
	return human.Label(loginName(getenv) + "@" + host)
}
