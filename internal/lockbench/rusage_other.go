//go:build !(linux || darwin || freebsd)

package lockbench

import "time"

// childrenCPU is not known here.
func childrenCPU() time.Duration { return 0 }

// selfCPU is not known here.
func selfCPU() time.Duration { return 0 }
