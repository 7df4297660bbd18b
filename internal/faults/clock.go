package faults

import (
	"time"

	"golang.org/x/sys/unix"
)

// Now reads CLOCK_MONOTONIC, in nanoseconds. On Linux that clock is one
// for the whole system, so the times that separate processes record are
// comparable: the harness, its workers and the server share this clock.
// It is the clock Go's runtime uses for timers and time.Since, so a
// lease's local deadline runs on it too.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("faults: clock_gettime(CLOCK_MONOTONIC): " + err.Error()) // never fails on Linux
	}
	return ts.Nano()
}

// never is a time after every other.
const never = int64(1<<63 - 1)

// dur formats a time span in nanoseconds for messages.
func dur(ns int64) string { return time.Duration(ns).Round(time.Microsecond).String() }
