package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sema-dev/sema/internal/dsn"
)

const pivotSynopsis = "sema bench pivot [flags]"

const pivotHelp = `
The pivot-file scenario of PmaControl (seeds/001): W workers each update the
status of a random one of S servers every ~interval (uniform 0.5-1.5x), in
JSON files: lock, read, decode, change one server, encode, write a temp file
and rename it over the old one, unlock. Two layouts: one global lock and file
holding every server ("global"), or one lock and file per server
("sharded"); each under sema (one client per worker, as separate processes
would have) and under bare flock(2) on a lock file per data file. The wait is
the time spent in Acquire, or in opening the lock file and flock(LOCK_EX).

Workers are goroutines of this process with their own backend connections
and file descriptors: kernel locks treat them as they treat processes. The
locks take turns in short rounds (--rounds per --duration, in ABBA order),
so that each sees the same host load; the garbage collector of this one
process runs between rounds and rarely during them (it would stall every
worker at once, which separate processes do not do to each other). The p99
comes with its 95% confidence interval; the host's load average is printed
before and after.
`

// pivotOptions are the flags of sema bench pivot.
type pivotOptions struct {
	workers  int
	interval time.Duration
	duration time.Duration
	rounds   int
	servers  []int
	payload  int
	backend  string
	dir      string
	locks    []string // "sema", "flock"
	layouts  []string // "global", "sharded"
	getenv   func(string) string
}

func parsePivotArgs(args []string, w io.Writer) (o pivotOptions, help bool, err error) {
	fs := newFlagSetHelp("bench pivot", pivotSynopsis, pivotHelp, w)
	fs.IntVar(&o.workers, "workers", 16, "concurrent `N` workers")
	fs.DurationVar(&o.interval, "interval", 100*time.Millisecond, "mean `pause` between a worker's updates")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "how long each (S, lock, layout) configuration runs in all")
	fs.IntVar(&o.rounds, "rounds", 10, "`N` rounds per S and layout, each lock running duration/N in each")
	servers := fs.String("servers", "10,50,100,200,500", "comma-separated `list` of server counts S")
	fs.IntVar(&o.payload, "payload", 2048, "approximate JSON `bytes` per server (the seed's ~2 KB)")
	fs.StringVar(&o.backend, "backend", "", "sema backend `URL` (default: file:// in a directory under --dir; $SEMA_BACKEND is not used)")
	fs.StringVar(&o.dir, "dir", "", "working `directory` for the data (and default lock) files (default: a temporary one, removed at the end)")
	locks := fs.String("locks", "sema,flock", "`which` locks to measure: sema, flock")
	layouts := fs.String("layouts", "global,sharded", "`which` layouts to measure: global, sharded")
	if err := parseFlagsErr(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, true, nil
		}
		return o, false, err
	}
	if fs.NArg() > 0 {
		return o, false, usageError("unexpected argument %q", fs.Arg(0))
	}
	switch {
	case o.workers < 1 || o.workers > 10000:
		return o, false, usageError("--workers %d: want 1 to 10000", o.workers)
	case o.interval < 0 || o.interval > time.Hour:
		return o, false, usageError("--interval %v: want 0 to 1h", o.interval)
	case o.duration <= 0 || o.duration > 24*time.Hour:
		return o, false, usageError("--duration %v: want more than 0, at most 24h", o.duration)
	case o.rounds < 1 || o.rounds > 1000:
		return o, false, usageError("--rounds %d: want 1 to 1000", o.rounds)
	case o.payload < 0 || o.payload > 1<<20:
		return o, false, usageError("--payload %d: want 0 to 1048576", o.payload)
	}
	for _, f := range strings.Split(*servers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 100000 {
			return o, false, usageError("--servers: %q is not a count from 1 to 100000", f)
		}
		o.servers = append(o.servers, n)
	}
	if o.locks, err = pickList("--locks", *locks, "sema", "flock"); err != nil {
		return o, false, err
	}
	if o.layouts, err = pickList("--layouts", *layouts, "global", "sharded"); err != nil {
		return o, false, err
	}
	return o, false, nil
}

// pickList parses a comma-separated subset of known, keeping known's order.
func pickList(flagName, s string, known ...string) ([]string, error) {
	want := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		ok := false
		for _, k := range known {
			ok = ok || f == k
		}
		if !ok {
			return nil, usageError("%s: %q is not one of %s", flagName, f, strings.Join(known, ", "))
		}
		want[f] = true
	}
	var out []string
	for _, k := range known {
		if want[k] {
			out = append(out, k)
		}
	}
	return out, nil
}

func benchPivot(ctx context.Context, env *Env, args []string) int {
	o, help, err := parsePivotArgs(args, env.Stderr)
	o.getenv = env.Getenv
	if help {
		return ExitOK
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "sema bench pivot: %s\n", errMessage(err))
		return ExitUsage
	}
	if o.dir == "" {
		d, err := os.MkdirTemp("", "sema-bench-pivot-")
		if err != nil {
			fmt.Fprintf(env.Stderr, "sema bench pivot: %v\n", err)
			return ExitInternal
		}
		defer os.RemoveAll(d)
		o.dir = d
	} else if err := os.MkdirAll(o.dir, 0o700); err != nil {
		fmt.Fprintf(env.Stderr, "sema bench pivot: --dir: %v\n", err)
		return ExitUsage
	}
	if o.dir, err = filepath.Abs(o.dir); err != nil {
		fmt.Fprintf(env.Stderr, "sema bench pivot: --dir: %v\n", err)
		return ExitUsage
	}
	if o.backend == "" {
		lockDir := filepath.Join(o.dir, "locks")
		if err := os.MkdirAll(lockDir, 0o700); err != nil {
			fmt.Fprintf(env.Stderr, "sema bench pivot: %v\n", err)
			return ExitInternal
		}
		o.backend = (&url.URL{Scheme: "file", Path: lockDir}).String()
	}
	// Room for every worker's open files (sema keeps a name's file open for
	// a moment after use) without growing the table during a run.
	growFDTable(o.workers*64 + slices.Max(o.servers) + 1024)
	defer debug.SetGCPercent(debug.SetGCPercent(pivotGCPercent))
	fmt.Fprintf(env.Stdout, "pivot: %d workers, one update every ~%v each, %v per configuration in %d rounds, ~%d B per server; sema backend %s\n",
		o.workers, o.interval, o.duration, o.rounds, o.payload, dsn.Redact(o.backend))
	fmt.Fprintf(env.Stdout, "load average before: %s\n", loadAvg())
	results := map[string]pivotResult{}
	for _, s := range o.servers {
		for _, lay := range o.layouts {
			if ctx.Err() != nil {
				fmt.Fprintln(env.Stderr, "sema bench pivot: interrupted")
				return 130
			}
			rs, err := runPivotRounds(ctx, o, s, lay)
			if err != nil {
				if ctx.Err() != nil {
					fmt.Fprintln(env.Stderr, "sema bench pivot: interrupted")
					return 130
				}
				fmt.Fprintf(env.Stderr, "sema bench pivot: S=%d %s: %s\n", s, lay, errMessage(err))
				return exitCodeFor(err)
			}
			for i, lk := range o.locks {
				r := rs[i]
				results[pivotKey(s, lk, lay)] = r
				fmt.Fprintf(env.Stderr, "  S=%-4d %-5s %-7s %6d updates  wait avg %-9s p99 %-9s (95%% CI %s-%s)  max %s\n",
					s, lk, lay, r.n, fmtDur(r.avg), fmtDur(r.p99), fmtDur(r.p99lo), fmtDur(r.p99hi), fmtDur(r.max))
			}
		}
	}
	printPivotTable(env.Stdout, o, results)
	fmt.Fprintf(env.Stdout, "load average after: %s\n", loadAvg())
	return ExitOK
}

// pivotGCPercent spaces out this process's garbage collections during a
// benchmark (see pivotHelp); runPivotRounds also collects between rounds.
const pivotGCPercent = 1000

// runPivotRounds measures every lock on one S and layout: the locks' runs
// are cut into o.rounds slices taken in turn (ABBA...), each after a
// garbage collection.
func runPivotRounds(ctx context.Context, o pivotOptions, servers int, layout string) ([]pivotResult, error) {
	cases := make([]*pivotCase, len(o.locks))
	defer func() {
		for _, c := range cases {
			if c != nil {
				c.close()
			}
		}
	}()
	for i, lk := range o.locks {
		var err error
		if cases[i], err = newPivotCase(ctx, o, servers, lk, layout); err != nil {
			return nil, fmt.Errorf("%s: %w", lk, err)
		}
	}
	slice := o.duration / time.Duration(o.rounds)
	for r := range o.rounds {
		for k := range cases {
			i := k
			if r%2 == 1 {
				i = len(cases) - 1 - k
			}
			runtime.GC()
			if err := cases[i].run(ctx, slice); err != nil {
				return nil, fmt.Errorf("%s: %w", o.locks[i], err)
			}
		}
	}
	out := make([]pivotResult, len(cases))
	for i, c := range cases {
		out[i] = summarize(c.waits)
	}
	return out, nil
}

// loadAvg returns the host's load averages (1, 5, 15 min), or "unknown".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if err != nil || len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func pivotKey(s int, lock, layout string) string { return fmt.Sprintf("%d/%s/%s", s, lock, layout) }

func printPivotTable(w io.Writer, o pivotOptions, res map[string]pivotResult) {
	fmt.Fprintln(w, "\nlock wait per update:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	head := "servers\tlock\t"
	for _, lay := range o.layouts {
		head += lay + " avg\t" + lay + " p99\t" + "p99 95% CI\t" + lay + " n\t"
	}
	fmt.Fprintln(tw, head)
	for _, s := range o.servers {
		for _, lk := range o.locks {
			line := strconv.Itoa(s) + "\t" + lk + "\t"
			for _, lay := range o.layouts {
				r := res[pivotKey(s, lk, lay)]
				line += fmtDur(r.avg) + "\t" + fmtDur(r.p99) + "\t" + fmtDur(r.p99lo) + "-" + fmtDur(r.p99hi) + "\t" + strconv.Itoa(r.n) + "\t"
			}
			fmt.Fprintln(tw, line)
		}
	}
	tw.Flush()
}

// fmtDur prints a duration in ms with 2-3 significant digits.
func fmtDur(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 1:
		return fmt.Sprintf("%.3fms", ms)
	case ms < 100:
		return fmt.Sprintf("%.2fms", ms)
	case ms < 10000:
		return fmt.Sprintf("%.0fms", ms)
	}
	return fmt.Sprintf("%.1fs", ms/1000)
}
