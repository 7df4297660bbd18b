package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/lockbench"
)

const pivotSynopsis = "sema bench pivot [flags]"

const pivotHelp = `
A monitoring tool's shared status files: W workers each update the status of
a random one of S servers every ~interval (uniform 0.5-1.5x), in JSON files:
lock, read, decode, change one server, encode, write a temp file and rename
it over the old one, unlock. Two layouts: one global lock and file
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

func parsePivotArgs(args []string, w io.Writer) (o lockbench.PivotOptions, help bool, err error) {
	fs := newFlagSetHelp("bench pivot", pivotSynopsis, pivotHelp, w)
	fs.IntVar(&o.Workers, "workers", 16, "concurrent `N` workers")
	fs.DurationVar(&o.Interval, "interval", 100*time.Millisecond, "mean `pause` between a worker's updates")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "how long each (S, lock, layout) configuration runs in all")
	fs.IntVar(&o.Rounds, "rounds", 10, "`N` rounds per S and layout, each lock running duration/N in each")
	servers := fs.String("servers", "10,50,100,200,500", "comma-separated `list` of server counts S")
	fs.IntVar(&o.Payload, "payload", 2048, "approximate JSON `bytes` per server")
	fs.StringVar(&o.Backend, "backend", "", "sema backend `URL` (default: file:// in a directory under --dir; $SEMA_BACKEND is not used)")
	fs.StringVar(&o.Dir, "dir", "", "working `directory` for the data (and default lock) files (default: a temporary one, removed at the end)")
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
	case o.Workers < 1 || o.Workers > 10000:
		return o, false, usageError("--workers %d: want 1 to 10000", o.Workers)
	case o.Interval < 0 || o.Interval > time.Hour:
		return o, false, usageError("--interval %v: want 0 to 1h", o.Interval)
	case o.Duration <= 0 || o.Duration > 24*time.Hour:
		return o, false, usageError("--duration %v: want more than 0, at most 24h", o.Duration)
	case o.Rounds < 1 || o.Rounds > 1000:
		return o, false, usageError("--rounds %d: want 1 to 1000", o.Rounds)
	case o.Payload < 0 || o.Payload > 1<<20:
		return o, false, usageError("--payload %d: want 0 to 1048576", o.Payload)
	}
	for _, f := range strings.Split(*servers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 100000 {
			return o, false, usageError("--servers: %q is not a count from 1 to 100000", f)
		}
		o.Servers = append(o.Servers, n)
	}
	if o.Locks, err = pickList("--locks", *locks, "sema", "flock"); err != nil {
		return o, false, err
	}
	if o.Layouts, err = pickList("--layouts", *layouts, "global", "sharded"); err != nil {
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
	if help {
		return ExitOK
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "sema bench pivot: %s\n", errMessage(err))
		return ExitUsage
	}
	cleanup, code := benchWorkdir(env, "pivot", &o.Dir, &o.Backend)
	if cleanup == nil {
		return code
	}
	defer cleanup()
	o.Open = func(ctx context.Context) (sema.Backend, error) { return openBackend(ctx, o.Backend, env.Getenv) }
	return benchDone(ctx, env, "pivot", lockbench.Pivot(ctx, o, env.Stdout, env.Stderr))
}
