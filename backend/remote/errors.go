package remote

import (
	"fmt"
	"strings"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/wire"
)

// Errors of the server's access control. Both wrap sema.ErrPermission:
// they are neither contention nor a transient failure, and retrying does
// not help.
var (
	// ErrUnauthorized: the server wants a token and got none or an unknown
	// one (HTTP 401).
	ErrUnauthorized = fmt.Errorf("remote: unauthorized (set a valid token): %w", sema.ErrPermission)
	// ErrForbidden: the token's role may not do this, or the lease belongs
	// to another token (HTTP 403).
	ErrForbidden = fmt.Errorf("remote: forbidden: %w", sema.ErrPermission)
)

// maxMessage bounds how much of a server's message goes into an error.
const maxMessage = 200

// apiError maps an API error body to an error wrapping the matching sema
// sentinel.
func apiError(op, name string, e *wire.Error) error {
	if e.Code == wire.CodeNotAcquired {
		return &sema.HeldError{Name: name, Limit: e.Limit, Holders: e.Holders, Waiters: e.Waiters}
	}
	var target error
	switch e.Code {
	case wire.CodeLimitMismatch:
		target = sema.ErrLimitMismatch
	case wire.CodeLeaseLost:
		switch e.Reason {
		case wire.ReasonForceReleased:
			target = sema.ErrForceReleased
		case wire.ReasonExpired:
			target = sema.ErrExpired
		default:
			target = sema.ErrLeaseLost
		}
	case wire.CodeNotHeld:
		target = sema.ErrNotHeld
		if op == "renew" { // a lease the server does not know is lost to its holder
			target = fmt.Errorf("%w: %w", sema.ErrLeaseLost, sema.ErrNotHeld)
		}
	case wire.CodeInvalidName:
		target = sema.ErrInvalidName
	case wire.CodeInvalidArgument, wire.CodeBadRequest, wire.CodeTooLarge:
		target = sema.ErrInvalidArgument
	case wire.CodeUnauthorized:
		target = ErrUnauthorized
	case wire.CodeForbidden:
		target = ErrForbidden
	default:
		// unavailable, internal, and "closed": a server shutting down is,
		// for its clients, a server that will be back (leases are durable),
		// not a closed client. Unknown codes and missing routes (a proxy,
		// an older server) land here too.
		target = sema.ErrUnavailable
	}
	msg := e.Message
	if len(msg) > maxMessage {
		msg = strings.ToValidUTF8(msg[:maxMessage], "") + "…"
	}
	if msg == "" {
		msg = e.Code
	}
	text := fmt.Sprintf("remote: %s %q: %s", op, name, msg)
	if !strings.HasSuffix(msg, target.Error()) {
		text += ": " + target.Error()
	}
	return &apiErr{text: text, target: target}
}

// apiErr is a server's error: its message, then the sentinel it wraps
// unless the message already ends with it (the server's own errors wrap
// the same sentinels), so that an error says the thing once.
type apiErr struct {
	text   string
	target error
}

func (e *apiErr) Error() string { return e.text }
func (e *apiErr) Unwrap() error { return e.target }
