//go:build !linux

package cli

import "fmt"

// runFront is only implemented on Linux (process groups, Pdeathsig, /proc).
func runFront(env *Env, _ []string, _ runConfig) int {
	fmt.Fprintln(env.Stderr, "sema run: not supported on this operating system yet")
	return ExitInternal
}
