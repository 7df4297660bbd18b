package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/human"
)

const statusSynopsis = "sema status [flags] NAME"

// statusCmd shows the holders and waiters of one name.
var statusCmd = &command{
	name:    "status",
	summary: "show the holders and waiters of a semaphore",
	run: func(ctx context.Context, env *Env, args []string) int {
		fs := newFlagSet("status", statusSynopsis, env.Stderr)
		backend := backendFlag(fs)
		asJSON := fs.Bool("json", false, "print the status as JSON")
		if code, done := parseFlags(fs, args); done {
			return code
		}
		if fs.NArg() != 1 {
			fmt.Fprintf(env.Stderr, "sema status: need exactly one NAME\nusage: %s\n", statusSynopsis)
			return ExitUsage
		}
		name := fs.Arg(0)
		if err := sema.ValidateName(name); err != nil {
			fmt.Fprintf(env.Stderr, "sema status: %s\n", errMessage(err))
			return ExitUsage
		}
		c, code := openClient(ctx, env, *backend)
		if c == nil {
			return code
		}
		defer c.Close()
		st, err := c.Describe(ctx, name)
		if err != nil {
			fmt.Fprintf(env.Stderr, "sema status: %s\n", errMessage(err))
			return exitCodeFor(err)
		}
		if st.Name == "" {
			st.Name = name
		}
		if *asJSON {
			if st.Holders == nil {
				st.Holders = []sema.Holder{}
			}
			if st.Waiters == nil {
				st.Waiters = []sema.WaiterInfo{}
			}
			return writeJSON(env, st)
		}
		printStatus(env.Stdout, st)
		return ExitOK
	},
}

func printStatus(w io.Writer, st sema.Status) {
	if len(st.Holders) == 0 && len(st.Waiters) == 0 {
		fmt.Fprintf(w, "%s: not held, nobody waiting\n", human.Line(st.Name))
		return
	}
	fmt.Fprintf(w, "%s: %d/%d used, %d holder(s), %d waiter(s)\n", human.Line(st.Name), st.Used, st.Limit, len(st.Holders), len(st.Waiters))
	if len(st.Holders) > 0 {
		fmt.Fprintln(w, "\nholders:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  LEASE\tOWNER\tTOKEN\tWEIGHT\tHELD FOR\tEXPIRES\tHOST\tPID")
		for _, h := range st.Holders {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", dash(h.ID), dash(human.Line(h.Owner)), h.Token, h.Weight,
				human.Age(h.AcquiredAt), until(h.ExpiresAt), dash(human.Line(h.Host)), pid(h.PID))
		}
		tw.Flush()
	}
	if len(st.Waiters) > 0 {
		fmt.Fprintln(w, "\nwaiters (in arrival order):")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  OWNER\tWEIGHT\tWAITING FOR\tHOST\tPID")
		for _, q := range st.Waiters {
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\n", dash(human.Line(q.Owner)), q.Weight, human.Age(q.Since), dash(human.Line(q.Host)), pid(q.PID))
		}
		tw.Flush()
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func pid(p int) string {
	if p <= 0 {
		return "-"
	}
	return fmt.Sprint(p)
}
