package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/human"
)

// lsCommand lists the names that have holders or waiters.
func lsCommand() *command {
	c := &command{
		name:         "ls",
		summary:      "list held semaphores: used/limit, holders, waiters, oldest holder",
		synopsis:     "sema ls [flags] [PREFIX]",
		interspersed: true,
	}
	var backend string
	var asJSON bool
	register := func(fs *flag.FlagSet) {
		backendFlag(fs, &backend)
		fs.BoolVar(&asJSON, "json", false, "print JSON (an array of statuses) instead of a table")
	}
	c.flags = register
	c.run = func(ctx context.Context, env *Env, args []string) int {
		rest, code, done := c.parse(env, args, register)
		if done {
			return code
		}
		if len(rest) > 1 {
			fmt.Fprintf(env.Stderr, "sema ls: one PREFIX at most (usage: %s)\n", c.synopsis)
			return ExitUsage
		}
		cl, code := openClient(ctx, env.Stderr, "ls", backend, slog.LevelWarn)
		if cl == nil {
			return code
		}
		defer cl.Close()
		prefix := ""
		if len(rest) == 1 {
			prefix = rest[0]
		}
		sts, err := cl.List(ctx, prefix)
		if err != nil {
			fmt.Fprintf(env.Stderr, "sema ls: %s\n", errMessage(err))
			return exitCodeFor(err)
		}
		if asJSON {
			if sts == nil {
				sts = []sema.Status{}
			}
			return writeJSON(env, "ls", sts)
		}
		printList(env.Stdout, sts)
		return ExitOK
	}
	return c
}

// printList prints one line per name.
func printList(w io.Writer, sts []sema.Status) {
	if len(sts) == 0 {
		fmt.Fprintln(w, "no semaphores held")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tUSED/LIMIT\tHOLDERS\tWAITERS\tOLDEST HOLDER")
	for _, st := range sts {
		oldest := "-"
		if h, ok := oldestHolder(st.Holders); ok {
			oldest = fmt.Sprintf("%s (%s)", human.Line(h.Owner), human.Age(h.AcquiredAt))
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%d\t%d\t%s\n", human.Line(st.Name), st.Used, st.Limit,
			len(st.Holders), len(st.Waiters), oldest)
	}
	tw.Flush()
}

func oldestHolder(hs []sema.Holder) (sema.Holder, bool) {
	if len(hs) == 0 {
		return sema.Holder{}, false
	}
	o := hs[0]
	for _, h := range hs[1:] {
		if h.AcquiredAt.Before(o.AcquiredAt) {
			o = h
		}
	}
	return o, true
}

func writeJSON(env *Env, cmd string, v any) int {
	enc := json.NewEncoder(env.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(env.Stderr, "sema %s: %v\n", cmd, err)
		return ExitInternal
	}
	return ExitOK
}

// until renders how long until t, for expiry columns.
func until(t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	d := time.Until(t)
	if d < 0 {
		return "expired"
	}
	return "in " + d.Round(100*time.Millisecond).String()
}
