package cli

import (
	"context"
	"fmt"
	"io"
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
