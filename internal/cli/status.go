package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/human"
)

// statusCommand shows the holders and waiters of one name.
func statusCommand() *command {
	c := &command{
		name:         "status",
		summary:      "show the holders and waiters of a semaphore",
		synopsis:     "sema status [flags] NAME",
		interspersed: true,
	}
	var backend string
	var asJSON bool
	register := func(fs *flag.FlagSet) {
		backendFlag(fs, &backend)
		fs.BoolVar(&asJSON, "json", false, "print the status as JSON")
	}
	c.flags = register
	c.run = func(ctx context.Context, env *Env, args []string) int {
		rest, code, done := c.parse(env, args, register)
		if done {
			return code
		}
		if len(rest) != 1 {
			fmt.Fprintf(env.Stderr, "sema status: need exactly one NAME (usage: %s)\n", c.synopsis)
			return ExitUsage
		}
		name := rest[0]
		if err := sema.ValidateName(name); err != nil {
			fmt.Fprintf(env.Stderr, "sema status: %s\n", errMessage(err))
			return ExitUsage
		}
		cl, code := openClient(ctx, env.Stderr, "status", backend, slog.LevelWarn)
		if cl == nil {
			return code
		}
		defer cl.Close()
		st, err := cl.Describe(ctx, name)
		if err != nil {
			fmt.Fprintf(env.Stderr, "sema status: %s\n", errMessage(err))
			return exitCodeFor(err)
		}
		if st.Name == "" {
			st.Name = name
		}
		if asJSON {
			if st.Holders == nil {
				st.Holders = []sema.Holder{}
			}
			if st.Waiters == nil {
				st.Waiters = []sema.WaiterInfo{}
			}
			return writeJSON(env, "status", st)
		}
		printStatus(env.Stdout, st)
		return ExitOK
	}
	return c
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
			expires := until(h.ExpiresAt)
			if h.ForceReleased { // over for its holder; its permits free then
				expires += " (force-released)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", dash(h.ID), dash(human.Line(h.Owner)), h.Token, h.Weight,
				human.Age(h.AcquiredAt), expires, dash(human.Line(h.Host)), pid(h.PID))
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
