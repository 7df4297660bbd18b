package lockbench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// CLILoop is the shell's view of contention: Loops concurrent shell loops,
// each running Runs times a job under the lock, through `sema run` and
// through flock(1).
type CLILoop struct {
	Loops, Runs int
	// SemaRun is the sema run command line up to and including "--".
	SemaRun []string
	// Flock is the path of flock(1), "" if this host has none.
	Flock string
	// True makes the job true(1) instead of the increment of a counter
	// file: what the lock itself costs a shell.
	True bool
}

// increment is the job: read the number in the file $0, write it plus one.
const increment = `n=$(cat "$0"); echo $((n+1)) > "$0"`

// loop runs "$@" $1 times (shifted), stopping at the first failure.
const loop = `n=$1; shift; i=0; while [ $i -lt $n ]; do "$@" || exit 1; i=$((i+1)); done`

// cliRound is what one round of loops took: wall time, and the CPU time
// of every process it ran (the loops' shells, the locks, the jobs).
type cliRound struct{ wall, cpu time.Duration }

func (c *CLILoop) run(ctx context.Context, dir string, rounds int, out, progress io.Writer) error {
	path := filepath.Join(dir, "cli-counter")
	if err := os.WriteFile(path, []byte("0\n"), 0o600); err != nil {
		return err
	}
	job := []string{"sh", "-c", increment, path}
	if c.True {
		job = []string{"true"}
	}
	cmds := map[string][]string{"sema run": append(append([]string(nil), c.SemaRun...), job...)}
	kinds := []string{"sema run"}
	if c.Flock != "" {
		cmds["flock(1)"] = append([]string{c.Flock, path + ".lock"}, job...)
		kinds = append(kinds, "flock(1)")
	}
	res := map[string][]cliRound{}
	want := 0
	for r := range rounds {
		for k := range kinds {
			kind := kinds[k]
			if r%2 == 1 {
				kind = kinds[len(kinds)-1-k]
			}
			got, err := c.round(ctx, cmds[kind])
			if err != nil {
				return fmt.Errorf("%s: %w", kind, err)
			}
			res[kind] = append(res[kind], got)
			check := ""
			if !c.True {
				want += c.Loops * c.Runs
				b, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || n != want {
					return fmt.Errorf("%s: %w: the counter reads %q, %d increments were made", kind, ErrLostUpdates, b, want)
				}
				check = ", counter exact"
			}
			fmt.Fprintf(progress, "  %-8s round %d: %d loops × %d runs in %v%s\n", kind, r+1, c.Loops, c.Runs, got.wall.Round(time.Millisecond), check)
		}
	}
	what := "a locked increment of a counter file"
	if c.True {
		what = "true(1) under the lock"
	}
	fmt.Fprintf(out, "\nshell loops: %d concurrent loops × %d runs of %s (medians of %d rounds, alternating):\n", c.Loops, c.Runs, what, rounds)
	runs := time.Duration(c.Loops * c.Runs)
	row := func(kind string) (wall, cpu time.Duration) {
		var ws, cs []float64
		for _, r := range res[kind] {
			ws, cs = append(ws, r.wall.Seconds()), append(cs, r.cpu.Seconds())
		}
		wall, cpu = time.Duration(median(ws)*1e9), time.Duration(median(cs)*1e9)
		fmt.Fprintf(out, "  %-9s %8.3fs in all; per run %s wall (a loop's run after run), %s CPU\n",
			kind, wall.Seconds(), fmtDur(wall*time.Duration(c.Loops)/runs), fmtDur(cpu/runs))
		return wall, cpu
	}
	sw, sc := row("sema run")
	if c.Flock == "" {
		fmt.Fprintln(out, "  flock(1)  not found on this host: no comparison")
		return nil
	}
	fw, fc := row("flock(1)")
	fmt.Fprintf(out, "  sema run / flock(1): wall %s, CPU %s\n", ratio(sw.Seconds(), fw.Seconds()), ratio(sc.Seconds(), fc.Seconds()))
	return nil
}

// round runs c.Loops loops of cmd at once and returns when all are done.
func (c *CLILoop) round(ctx context.Context, cmd []string) (cliRound, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	cpu0 := childrenCPU()
	start := time.Now()
	for range c.Loops {
		wg.Go(func() {
			args := append([]string{"-c", loop, "loop", strconv.Itoa(c.Runs)}, cmd...)
			out, err := exec.CommandContext(ctx, "/bin/sh", args...).CombinedOutput()
			if err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return cliRound{wall: time.Since(start), cpu: childrenCPU() - cpu0}, first
}
