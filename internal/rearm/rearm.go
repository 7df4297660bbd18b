// Package rearm decides when a connection's read or write deadline must
// be set again. Setting one updates a runtime timer; a connection that
// serves many requests re-arms it only when less than half of the timeout
// (or more than all of it) is left.
package rearm

import "time"

// Renew returns the deadline to set so that d is allowed from now, and
// whether dl (the one set, zero for none) must change to it. d <= 0 means
// no deadline.
func Deadline(dl time.Time, d time.Duration, now time.Time) (time.Time, bool) {
	if d <= 0 {
		return time.Time{}, !dl.IsZero()
	}
	if left := dl.Sub(now); !dl.IsZero() && left >= d/2 && left <= d {
		return dl, false
	}
	return now.Add(d), true
}
