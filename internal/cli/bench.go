package cli

import (
	"context"
	"fmt"
)

// benchCmd is a placeholder until its issue lands.
var benchCmd = &command{
	name:    "bench",
	summary: "(not yet available)",
	run: func(_ context.Context, env *Env, _ []string) int {
		fmt.Fprintln(env.Stderr, "sema bench: not yet available")
		return ExitUsage
	},
}
