// Package lockbench holds the lock-contention scenarios of sema bench:
// pivot (workers updating shared JSON status files under a lock) and
// contend (separate processes incrementing one counter under one lock),
// each measured on sema and on bare flock(2) in alternating rounds.
package lockbench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/dsn"
)

// PivotOptions configure the pivot scenario (see the help of sema bench
// pivot).
type PivotOptions struct {
	Workers  int
	Interval time.Duration // mean pause between a worker's updates
	Duration time.Duration // per (S, layout), for each lock
	Rounds   int
	Servers  []int
	Payload  int // approximate JSON bytes per server
	Backend  string
	// Open opens Backend: one backend per worker, as separate processes
	// would have (mem:// excepted: its workers share one).
	Open    func(ctx context.Context) (sema.Backend, error)
	Dir     string   // working directory for the data files
	Locks   []string // "sema", "flock"
	Layouts []string // "global", "sharded"
}

// Pivot runs the pivot scenario: for each S and layout, every lock in
// short alternating rounds. It prints progress lines to progress and the
// table to out.
func Pivot(ctx context.Context, o PivotOptions, out, progress io.Writer) error {
	// Room for every worker's open files (sema keeps a name's file open for
	// a moment after use) without growing the table during a run.
	growFDTable(o.Workers*64 + slices.Max(o.Servers) + 1024)
	defer debug.SetGCPercent(debug.SetGCPercent(pivotGCPercent))
	fmt.Fprintf(out, "pivot: %d workers, one update every ~%v each, %v per configuration in %d rounds, ~%d B per server; sema backend %s\n",
		o.Workers, o.Interval, o.Duration, o.Rounds, o.Payload, dsn.Redact(o.Backend))
	fmt.Fprintf(out, "load average before: %s\n", LoadAvg())
	results := map[string]pivotResult{}
	for _, s := range o.Servers {
		for _, lay := range o.Layouts {
			if err := ctx.Err(); err != nil {
				return err
			}
			rs, err := runPivotRounds(ctx, o, s, lay)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("S=%d %s: %w", s, lay, err)
			}
			for i, lk := range o.Locks {
				r := rs[i]
				results[pivotKey(s, lk, lay)] = r
				fmt.Fprintf(progress, "  S=%-4d %-5s %-7s %6d updates  wait avg %-9s p99 %-9s (95%% CI %s-%s)  max %s\n",
					s, lk, lay, r.n, fmtDur(r.avg), fmtDur(r.p99), fmtDur(r.p99lo), fmtDur(r.p99hi), fmtDur(r.max))
			}
		}
	}
	printPivotTable(out, o, results)
	fmt.Fprintf(out, "load average after: %s\n", LoadAvg())
	return nil
}

// pivotGCPercent spaces out this process's garbage collections during a
// benchmark; runPivotRounds also collects between rounds: in one process a
// collection would stall every worker at once, which separate processes do
// not do to each other.
const pivotGCPercent = 1000

// runPivotRounds measures every lock on one S and layout: the locks' runs
// are cut into o.Rounds slices taken in turn (ABBA...), each after a
// garbage collection.
func runPivotRounds(ctx context.Context, o PivotOptions, servers int, layout string) ([]pivotResult, error) {
	cases := make([]*pivotCase, len(o.Locks))
	defer func() {
		for _, c := range cases {
			if c != nil {
				c.close()
			}
		}
	}()
	for i, lk := range o.Locks {
		var err error
		if cases[i], err = newPivotCase(ctx, o, servers, lk, layout); err != nil {
			return nil, fmt.Errorf("%s: %w", lk, err)
		}
	}
	slice := o.Duration / time.Duration(o.Rounds)
	for r := range o.Rounds {
		for k := range cases {
			i := k
			if r%2 == 1 {
				i = len(cases) - 1 - k
			}
			runtime.GC()
			if err := cases[i].run(ctx, slice); err != nil {
				return nil, fmt.Errorf("%s: %w", o.Locks[i], err)
			}
		}
	}
	out := make([]pivotResult, len(cases))
	for i, c := range cases {
		out[i] = summarize(c.waits)
	}
	return out, nil
}

func pivotKey(s int, lock, layout string) string { return fmt.Sprintf("%d/%s/%s", s, lock, layout) }

func printPivotTable(w io.Writer, o PivotOptions, res map[string]pivotResult) {
	fmt.Fprintln(w, "\nlock wait per update:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	head := "servers\tlock\t"
	for _, lay := range o.Layouts {
		head += lay + " avg\t" + lay + " p99\t" + "p99 95% CI\t" + lay + " n\t"
	}
	fmt.Fprintln(tw, head)
	for _, s := range o.Servers {
		for _, lk := range o.Locks {
			line := strconv.Itoa(s) + "\t" + lk + "\t"
			for _, lay := range o.Layouts {
				r := res[pivotKey(s, lk, lay)]
				line += fmtDur(r.avg) + "\t" + fmtDur(r.p99) + "\t" + fmtDur(r.p99lo) + "-" + fmtDur(r.p99hi) + "\t" + strconv.Itoa(r.n) + "\t"
			}
			fmt.Fprintln(tw, line)
		}
	}
	tw.Flush()
}
