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
// each running Runs times a command that increments a counter file under
// the lock, through `sema run` and through flock(1).
type CLILoop struct {
	Loops, Runs int
	// SemaRun is the sema run command line up to and including "--".
	SemaRun []string
	// Flock is the path of flock(1), "" if this host has none.
	Flock string
}

// increment is the job: read the number in the file $0, write it plus one.
const increment = `n=$(cat "$0"); echo $((n+1)) > "$0"`

// loop runs "$@" $1 times (shifted), stopping at the first failure.
const loop = `n=$1; shift; i=0; while [ $i -lt $n ]; do "$@" || exit 1; i=$((i+1)); done`

func (c *CLILoop) run(ctx context.Context, dir string, rounds int, out, progress io.Writer) error {
	path := filepath.Join(dir, "cli-counter")
	if err := os.WriteFile(path, []byte("0\n"), 0o600); err != nil {
		return err
	}
	cmds := map[string][]string{"sema run": append(append([]string(nil), c.SemaRun...), "sh", "-c", increment, path)}
	kinds := []string{"sema run"}
	if c.Flock != "" {
		cmds["flock(1)"] = []string{c.Flock, path + ".lock", "sh", "-c", increment, path}
		kinds = append(kinds, "flock(1)")
	}
	times := map[string][]float64{}
	want := 0
	for r := range rounds {
		for k := range kinds {
			kind := kinds[k]
			if r%2 == 1 {
				kind = kinds[len(kinds)-1-k]
			}
			d, err := c.round(ctx, cmds[kind])
			if err != nil {
				return fmt.Errorf("%s: %w", kind, err)
			}
			want += c.Loops * c.Runs
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if got, err := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || got != want {
				return fmt.Errorf("%s: %w: the counter reads %q, %d increments were made", kind, ErrLostUpdates, b, want)
			}
			times[kind] = append(times[kind], d.Seconds())
			fmt.Fprintf(progress, "  %-8s round %d: %d loops × %d runs in %v, counter exact\n", kind, r+1, c.Loops, c.Runs, d.Round(time.Millisecond))
		}
	}
	fmt.Fprintf(out, "\nshell loops: %d concurrent loops × %d runs of a locked increment (median of %d rounds, alternating):\n", c.Loops, c.Runs, rounds)
	s := median(times["sema run"])
	fmt.Fprintf(out, "  sema run  %.2fs  (%.1f ms per run)\n", s, 1000*s/float64(c.Runs))
	if c.Flock == "" {
		fmt.Fprintln(out, "  flock(1)  not found on this host: no comparison")
		return nil
	}
	f := median(times["flock(1)"])
	fmt.Fprintf(out, "  flock(1)  %.2fs  (%.1f ms per run); sema run / flock(1): %s\n", f, 1000*f/float64(c.Runs), ratio(s, f))
	return nil
}

// round runs c.Loops loops of cmd at once and returns when all are done.
func (c *CLILoop) round(ctx context.Context, cmd []string) (time.Duration, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
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
	return time.Since(start), first
}
