// Package human renders values for people reading a terminal: strings made
// printable on one line, durations rounded to what a reader cares about.
package human

import (
	"strings"
	"time"
)

// Line makes s printable on one line for tables and messages: control
// characters become '?'.
func Line(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

// Age renders how long ago t was, rounded for humans.
func Age(t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	d := time.Since(t)
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
