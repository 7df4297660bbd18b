//go:build !linux

package supervise

import "fmt"

// Front is only implemented on Linux (process groups, Pdeathsig, /proc).
func Front(io Stdio, _ string, _ []string) int {
	fmt.Fprintln(io.Err, "sema run: not supported on this operating system yet")
	return ExitInternal
}

// Supervise exists on Linux only.
func Supervise(Config, bool, Opener) int { return ExitInternal }
