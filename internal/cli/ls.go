package cli

import (
	"context"
	"fmt"
)

// lsCmd is a placeholder until its issue lands.
var lsCmd = &command{
	name:    "ls",
	summary: "(not yet available)",
	run: func(_ context.Context, env *Env, _ []string) int {
		fmt.Fprintln(env.Stderr, "sema ls: not yet available")
		return ExitUsage
	},
}
