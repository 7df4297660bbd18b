package cli

import (
	"context"
	"fmt"
)

// statusCmd is a placeholder until its issue lands.
var statusCmd = &command{
	name:    "status",
	summary: "(not yet available)",
	run: func(_ context.Context, env *Env, _ []string) int {
		fmt.Fprintln(env.Stderr, "sema status: not yet available")
		return ExitUsage
	},
}
