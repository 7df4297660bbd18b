package human

import (
	"strings"

	"github.com/sema-dev/sema"
)

// Message makes an error text read well after a program's own prefix
// ("sema run: …"): without the "sema: " that the library's sentinel errors
// start with, which would repeat the program's name, and on one line.
func Message(text string) string {
	for _, s := range sentinels() {
		if t := s.Error(); strings.Contains(text, t) {
			text = strings.ReplaceAll(text, t, strings.TrimPrefix(t, "sema: "))
		}
	}
	text = strings.ReplaceAll(text, "invalid argument: ", "")
	lines := strings.Split(text, "\n") // some drivers' errors span lines
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, " ")
}

// sentinels are the library's errors, whose texts start with "sema: ".
func sentinels() []error {
	return []error{sema.ErrNotAcquired, sema.ErrLeaseLost, sema.ErrNotHeld, sema.ErrLimitMismatch,
		sema.ErrInvalidName, sema.ErrInvalidArgument, sema.ErrUnavailable, sema.ErrPermission, sema.ErrClosed,
		sema.ErrReleased, sema.ErrExpired, sema.ErrForceReleased, sema.ErrMaxHold}
}

// Label makes s a valid owner label: printable on one line, valid UTF-8,
// at most sema.MaxOwnerLen bytes.
func Label(s string) string {
	s = Line(strings.ToValidUTF8(s, "?"))
	for len(s) > sema.MaxOwnerLen {
		s = strings.ToValidUTF8(s[:sema.MaxOwnerLen], "")
	}
	return s
}
