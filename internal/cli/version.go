package cli

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

func versionCommand() *command {
	return &command{
		name:     "version",
		summary:  "print the version and the revision it was built from",
		synopsis: "sema version (or sema --version)",
		run: func(_ context.Context, env *Env, args []string) int {
			if len(args) > 0 && args[0] != "-h" && args[0] != "--help" {
				fmt.Fprintln(env.Stderr, "sema version: takes no arguments")
				return ExitUsage
			}
			if len(args) > 0 {
				versionCommand().printHelp(env.Stdout)
				return ExitOK
			}
			return printVersion(env.Stdout)
		},
	}
}

// printVersion prints the module version and the VCS revision the binary
// was built from, as the Go toolchain recorded them.
func printVersion(w io.Writer) int {
	fmt.Fprintln(w, versionLine())
	return ExitOK
}

// versionLine is "sema VERSION (revision REV, TIME, modified; GO OS/ARCH)".
func versionLine() string {
	v, details := "unknown", []string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		set := map[string]string{}
		for _, s := range bi.Settings {
			set[s.Key] = s.Value
		}
		if rev := set["vcs.revision"]; rev != "" {
			details = append(details, "revision "+rev)
			if t := set["vcs.time"]; t != "" {
				details = append(details, t)
			}
			if set["vcs.modified"] == "true" {
				details = append(details, "modified")
			}
		}
	}
	build := runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	if len(details) == 0 {
		return fmt.Sprintf("sema %s (%s)", v, build)
	}
	return fmt.Sprintf("sema %s (%s; %s)", v, strings.Join(details, ", "), build)
}
