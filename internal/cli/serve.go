package cli

import (
	"context"
	"fmt"
)

// serveCmd is a placeholder until its issue lands.
var serveCmd = &command{
	name:    "serve",
	summary: "(not yet available)",
	run: func(_ context.Context, env *Env, _ []string) int {
		fmt.Fprintln(env.Stderr, "sema serve: not yet available")
		return ExitUsage
	},
}
