package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/human"
)

const lsSynopsis = "sema ls [flags] [PREFIX]"

// lsCmd lists the names that have holders or waiters.
var lsCmd = &command{
	name:    "ls",
	summary: "list held semaphores: used/limit, holders, waiters, oldest holder",
	run: func(ctx context.Context, env *Env, args []string) int {
		fs := newFlagSet("ls", lsSynopsis, env.Stderr)
		backend := backendFlag(fs)
		asJSON := fs.Bool("json", false, "print JSON (an array of statuses) instead of a table")
		if code, done := parseFlags(fs, args); done {
			return code
		}
		if fs.NArg() > 1 {
			fmt.Fprintf(env.Stderr, "sema ls: one PREFIX at most\nusage: %s\n", lsSynopsis)
			return ExitUsage
		}
		c, code := openClient(ctx, env, *backend)
		if c == nil {
			return code
		}
		defer c.Close()
		sts, err := c.List(ctx, fs.Arg(0))
		if err != nil {
			fmt.Fprintf(env.Stderr, "sema ls: %s\n", errMessage(err))
			return exitCodeFor(err)
		}
		if *asJSON {
			if sts == nil {
				sts = []sema.Status{}
			}
			return writeJSON(env, sts)
		}
		printList(env.Stdout, sts)
		return ExitOK
	},
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

func writeJSON(env *Env, v any) int {
	enc := json.NewEncoder(env.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(env.Stderr, "sema: %v\n", err)
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
