package cli

import (
	"context"
	"fmt"
)

// runCmd is a placeholder until its issue lands.
var runCmd = &command{
	name:    "run",
	summary: "(not yet available)",
	run: func(_ context.Context, env *Env, _ []string) int {
		fmt.Fprintln(env.Stderr, "sema run: not yet available")
		return ExitUsage
	},
}
