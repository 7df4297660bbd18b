package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/lockbench"
)

const contendSynopsis = "sema bench contend [flags]"

const contendHelp = `
P separate processes (this program, started P times) increment one counter
file, each increment a locked read-increment-write: under sema (one client
per process, one name) and under bare flock(2) on a lock file (one kept
descriptor per process). For each P the same processes run --rounds rounds,
each lock once per round in alternating order, each round --increments
increments shared among the P processes; the count is checked after every
round. It prints increments per second (median of rounds), the wait to
acquire (p50, p99, max), the hand-off latency (from the previous holder
starting to unlock to the next holder, when that is another process:
p50, p99), and the share of acquisitions that went to the process that
made the previous increment.

--locks fifo adds a reference lock: a ticket lock in a shared mapping
of a file, each waiter asleep in futex(2) on a word of its own, so that an
unlock wakes the next process in line and no other. It keeps no owner,
expiry or liveness (it is no lock to use: a holder that dies stops it,
and the round fails after 10 s), which makes it what any strictly FIFO
hand-off between processes costs at least on this host: sema's figures
beyond it are sema's own work, and flock's gains over it come from
letting the releasing process take the lock again (barging). Linux only.

Then, unless --handoffs is 0, the hand-off with one waiter: two processes,
each keeping the lock 1 ms after its increment and keeping away from it
1 ms after releasing it, so that every acquisition is a hand-off to a
process already waiting; it prints the latency from the holder starting to
unlock to the other process holding the lock (p50, p90, p99).

Then, unless --cli-loops is 0, the shell's view: --cli-loops concurrent
shell loops each run --cli-runs times "sema run NAME -- sh -c INCREMENT"
(or "-- true" with --cli-true), against "flock FILE sh -c INCREMENT"
(flock(1), if installed), in alternating rounds; it prints the median
wall time of each and the CPU time of every process they ran. With
--procs "" --handoffs 0 --cli-loops 1 --cli-true it measures what one
uncontended "sema run NAME -- true" costs next to flock(1).

The host's load average is printed before and after.
`

func parseContendArgs(args []string, w io.Writer) (o lockbench.ContendOptions, cli lockbench.CLILoop, help bool, err error) {
	c := &command{name: "bench contend", synopsis: contendSynopsis, help: contendHelp}
	fs := c.newFlagSet()
	procs := fs.String("procs", "2,8,50", "comma-separated `list` of process counts P (\"\": none)")
	fs.IntVar(&o.Increments, "increments", 2000, "increments per round (`N`), shared among the P processes")
	fs.IntVar(&o.Rounds, "rounds", 5, "`N` rounds per P, each lock once per round")
	locks := fs.String("locks", "sema,flock", "`which` locks to measure: sema, flock, fifo")
	fs.StringVar(&o.Backend, "backend", "", "sema backend `URL` (default: file:// in a directory under --dir; $SEMA_BACKEND is not used)")
	fs.StringVar(&o.Dir, "dir", "", "working `directory` for the counter (and default lock) files (default: a temporary one, removed at the end)")
	fs.IntVar(&o.Relay, "handoffs", 400, "increments per round (`N`) of the hand-off measure with one waiter; 0: skip it")
	fs.IntVar(&cli.Loops, "cli-loops", 50, "concurrent shell `loops` of sema run and flock(1); 0: skip the shell loops")
	fs.IntVar(&cli.Runs, "cli-runs", 10, "`runs` per shell loop")
	fs.BoolVar(&cli.True, "cli-true", false, "in the shell loops, run true(1) under the lock instead of an increment")
	if rest, err := parseArgs(fs, args, false); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.printUsage(w, fs)
			return o, cli, true, nil
		}
		return o, cli, false, usageError("%s (see 'sema bench contend -h')", err)
	} else if len(rest) > 0 {
		return o, cli, false, usageError("unexpected argument %q", rest[0])
	}
	for _, f := range strings.FieldsFunc(*procs, func(r rune) bool { return r == ',' }) {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1000 {
			return o, cli, false, usageError("--procs: %q is not a count from 1 to 1000", f)
		}
		o.Procs = append(o.Procs, n)
	}
	switch {
	case o.Increments < 1 || o.Increments > 10_000_000:
		return o, cli, false, usageError("--increments %d: want 1 to 10000000", o.Increments)
	case o.Rounds < 1 || o.Rounds > 1000:
		return o, cli, false, usageError("--rounds %d: want 1 to 1000", o.Rounds)
	case o.Relay < 0 || o.Relay > 1_000_000:
		return o, cli, false, usageError("--handoffs %d: want 0 to 1000000", o.Relay)
	case cli.Loops < 0 || cli.Loops > 1000:
		return o, cli, false, usageError("--cli-loops %d: want 0 to 1000", cli.Loops)
	case cli.Runs < 1 || cli.Runs > 100000:
		return o, cli, false, usageError("--cli-runs %d: want 1 to 100000", cli.Runs)
	case lockbench.IsMemURL(o.Backend):
		return o, cli, false, usageError("--backend %s lives in one process: the processes of this benchmark would not share it", o.Backend)
	}
	if o.Locks, err = pickList("--locks", *locks, "sema", "flock", "fifo"); err != nil {
		return o, cli, false, err
	}
	return o, cli, false, nil
}

func benchContend(ctx context.Context, env *Env, args []string) int {
	o, cli, help, err := parseContendArgs(args, env.Stderr)
	if help {
		return ExitOK
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "sema bench contend: %s\n", errMessage(err))
		return ExitUsage
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(env.Stderr, "sema bench contend: cannot find the sema executable: %v\n", err)
		return ExitInternal
	}
	cleanup, code := benchWorkdir(env, "contend", &o.Dir, &o.Backend)
	if cleanup == nil {
		return code
	}
	defer cleanup()
	o.Spawn = func(id int, counter, name string) *exec.Cmd {
		c := exec.Command(self, contendWorkerName, "-id", strconv.Itoa(id), "-counter", counter, "-name", name, "-backend", o.Backend)
		c.Stderr = env.Stderr
		return c
	}
	if cli.Loops > 0 {
		cli.SemaRun = []string{self, "run", "--backend", o.Backend, "bench-contend-cli", "--"}
		cli.Flock, _ = exec.LookPath("flock")
		o.CLI = &cli
	}
	return benchDone(ctx, env, "contend", lockbench.Contend(ctx, o, env.Stdout, env.Stderr))
}

// contendWorkerName is the hidden subcommand of one worker process of sema
// bench contend.
const contendWorkerName = "__contend"

// contendWorkerCommand is one worker process of sema bench contend.
func contendWorkerCommand() *command {
	return &command{
		name:    contendWorkerName,
		summary: "internal: a worker process of sema bench contend",
		hidden:  true,
		run: func(ctx context.Context, env *Env, args []string) int {
			fs := flag.NewFlagSet("sema __contend", flag.ContinueOnError)
			fs.SetOutput(env.Stderr)
			var a lockbench.WorkerArgs
			fs.IntVar(&a.ID, "id", 0, "worker number")
			fs.StringVar(&a.Counter, "counter", "", "counter file")
			fs.StringVar(&a.Name, "name", "", "sema name")
			backend := fs.String("backend", "", "sema backend URL")
			if err := fs.Parse(args); err != nil || a.Counter == "" || a.Name == "" || *backend == "" {
				fmt.Fprintln(env.Stderr, "sema __contend: internal command of sema bench contend, not for direct use")
				return ExitUsage
			}
			a.Open = func(ctx context.Context) (sema.Backend, error) { return sema.OpenEnv(ctx, *backend) }
			if err := lockbench.Worker(ctx, a, env.Stdin, env.Stdout); err != nil {
				fmt.Fprintf(env.Stderr, "sema __contend: %s\n", errMessage(err))
				return exitCodeFor(err)
			}
			return ExitOK
		},
	}
}
