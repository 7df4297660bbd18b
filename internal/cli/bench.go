package cli

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
)

// benchCmd dispatches to the benchmark scenarios.
var benchCmd = &command{
	name:    "bench",
	summary: "run a lock-contention benchmark scenario against bare flock(2)",
	run: func(ctx context.Context, env *Env, args []string) int {
		if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
			benchUsage(env.Stderr)
			if len(args) == 0 {
				return ExitUsage
			}
			return ExitOK
		}
		switch args[0] {
		case "pivot":
			return benchPivot(ctx, env, args[1:])
		case "contend":
			return benchContend(ctx, env, args[1:])
		}
		fmt.Fprintf(env.Stderr, "sema bench: unknown scenario %q\n", args[0])
		benchUsage(env.Stderr)
		return ExitUsage
	},
}

func benchUsage(w io.Writer) {
	fmt.Fprint(w, `usage: sema bench SCENARIO [flags]

scenarios:
  contend P processes increment one counter file under one lock, on sema
          and on bare flock(2), at several P; then shell loops of sema run
          against flock(1); prints increments/s, waits and hand-offs
  pivot   workers update the status of S servers in JSON files under a lock:
          one global lock+file versus one lock+file per server, on sema and
          on bare flock(2); prints lock-wait avg and p99 per S

Run 'sema bench SCENARIO -h' for its flags.
`)
}

// benchWorkdir prepares a scenario's working directory *dir (a temporary
// one, removed by cleanup, if empty) and, if *backend is empty, a file://
// backend in it. On failure it reports and returns a nil cleanup and the
// exit code.
func benchWorkdir(env *Env, scenario string, dir, backend *string) (cleanup func(), code int) {
	cleanup = func() {}
	if *dir == "" {
		d, err := os.MkdirTemp("", "sema-bench-"+scenario+"-")
		if err != nil {
			fmt.Fprintf(env.Stderr, "sema bench %s: %v\n", scenario, err)
			return nil, ExitInternal
		}
		cleanup = func() { os.RemoveAll(d) }
		*dir = d
	} else if err := os.MkdirAll(*dir, 0o700); err != nil {
		fmt.Fprintf(env.Stderr, "sema bench %s: --dir: %v\n", scenario, err)
		return nil, ExitUsage
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		cleanup()
		fmt.Fprintf(env.Stderr, "sema bench %s: --dir: %v\n", scenario, err)
		return nil, ExitUsage
	}
	*dir = abs
	if *backend == "" {
		lockDir := filepath.Join(abs, "locks")
		if err := os.MkdirAll(lockDir, 0o700); err != nil {
			cleanup()
			fmt.Fprintf(env.Stderr, "sema bench %s: %v\n", scenario, err)
			return nil, ExitInternal
		}
		*backend = (&url.URL{Scheme: "file", Path: lockDir}).String()
	}
	return cleanup, ExitOK
}

// benchDone reports how a scenario ended and returns the exit code.
func benchDone(ctx context.Context, env *Env, scenario string, err error) int {
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(env.Stderr, "sema bench %s: interrupted\n", scenario)
		return 130
	case err != nil:
		fmt.Fprintf(env.Stderr, "sema bench %s: %s\n", scenario, errMessage(err))
		return exitCodeFor(err)
	}
	return ExitOK
}
