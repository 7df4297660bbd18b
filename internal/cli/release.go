package cli

import (
	"context"
	"fmt"
)

// releaseCmd is a placeholder until its issue lands.
var releaseCmd = &command{
	name:    "release",
	summary: "(not yet available)",
	run: func(_ context.Context, env *Env, _ []string) int {
		fmt.Fprintln(env.Stderr, "sema release: not yet available")
		return ExitUsage
	},
}
