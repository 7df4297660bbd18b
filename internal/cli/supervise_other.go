//go:build !linux

package cli

import "context"

// superviseCmd exists on Linux only; elsewhere sema run is not supported.
var superviseCmd = &command{
	name:   "__supervise",
	hidden: true,
	run:    func(context.Context, *Env, []string) int { return ExitInternal },
}
