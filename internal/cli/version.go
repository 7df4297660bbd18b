package cli

import (
	"context"
	"fmt"
	"runtime/debug"
)

// Version is set at build time with -ldflags "-X .../internal/cli.Version=v1.2.3".
var Version = "dev"

var versionCmd = &command{
	name:    "version",
	summary: "print the version",
	run: func(_ context.Context, env *Env, _ []string) int {
		v := Version
		if bi, ok := debug.ReadBuildInfo(); ok && v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		fmt.Fprintf(env.Stdout, "sema %s\n", v)
		return ExitOK
	},
}
