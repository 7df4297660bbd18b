package cli

import (
	"context"
	"fmt"
)

// runCmd runs a command while holding permits of a semaphore.
var runCmd = &command{
	name:    "run",
	summary: "run a command while holding a lock or semaphore permits",
	run: func(_ context.Context, env *Env, args []string) int {
		cfg, help, err := parseRunArgs(args, env.Stderr)
		if help {
			return ExitOK
		}
		if err != nil {
			fmt.Fprintf(env.Stderr, "sema run: %s\n", errMessage(err))
			return ExitUsage
		}
		return runFront(env, args, cfg)
	},
}
