package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sema-dev/sema"
)

// dbError is a failed step: what was done (op, name), the sema sentinel it
// counts as, a message for people, and the driver's error.
type dbError struct {
	op, name  string
	kind      error // a sema sentinel
	msg       string
	transient bool // retrying later may help (the connection, not the request)
	cause     error
}

func (e *dbError) Error() string {
	var b strings.Builder
	b.WriteString("postgres: ")
	b.WriteString(e.op)
	if e.name != "" {
		fmt.Fprintf(&b, " %q", e.name)
	}
	b.WriteString(": ")
	b.WriteString(e.kind.Error())
	if e.msg != "" {
		b.WriteString(": ")
		b.WriteString(e.msg)
	}
	return b.String()
}

// Unwrap gives the sentinel and the driver's error (a *pgconn.PgError, a
// context error, …).
func (e *dbError) Unwrap() []error { return []error{e.kind, e.cause} }

// wrap turns a driver error of step op on name into a *dbError.
func (b *Backend) wrap(op, name string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*dbError](err); ok {
		return err
	}
	e := &dbError{op: op, name: name, kind: sema.ErrUnavailable, cause: err, msg: err.Error()}
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		e.msg = pe.Message
		if pe.Detail != "" {
			e.msg += " (" + pe.Detail + ")"
		}
		classify(e, pe)
		if _, ok := errors.AsType[*pgconn.ConnectError](err); ok && startupSetting(pe.Code) {
			// Refused while connecting: a run-time setting of the URL.
			e.kind, e.transient = sema.ErrInvalidArgument, false
			e.msg = "the server refused a setting of the URL: " + pe.Message +
				" (sema's own parameters are " + paramSchema + ", " + paramPrefix + " and " + paramListen +
				"; pgx sends the others to the server as settings)"
		}
		return e
	}
	switch {
	case b != nil && b.closed.Load():
		e.kind, e.msg = sema.ErrClosed, ""
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		e.transient = true
		e.msg = "no answer in time: " + err.Error()
	default:
		// Network errors, a connection that broke or could not be made.
		e.transient = true
		if ce, ok := errors.AsType[*pgconn.ConnectError](err); ok {
			e.msg = "cannot connect: " + ce.Error()
		}
	}
	return e
}

// classify sets the sentinel and transience of a server error by its
// SQLSTATE.
func classify(e *dbError, pe *pgconn.PgError) {
	code := pe.Code
	switch {
	case code == "28P01" || code == "28000":
		e.kind, e.msg = sema.ErrPermission, "authentication failed: "+e.msg
	case code == "42501":
		e.kind, e.msg = sema.ErrPermission, e.msg+" (the role needs the rights to use, or once to create, the sema tables)"
	case code == "25006":
		e.msg = "the database is read-only (a standby, or default_transaction_read_only is on): " + e.msg
	case code == "40001" || code == "40P01":
		e.transient = true
	case strings.HasPrefix(code, "08"), strings.HasPrefix(code, "53"), strings.HasPrefix(code, "57P"):
		// Connection exceptions, too many connections or out of resources,
		// a server shutting down or starting up.
		e.transient = true
	case code == "26000" || code == "42P05":
		// A prepared statement missing, or there already: the connection
		// does not keep sessions.
		e.msg = "prepared statements do not last on this connection (a transaction-mode pooler?): " +
			"set the listen URL (sema_listen=host:port) to the database itself, or add default_query_exec_mode=exec: " + e.msg
	case code == "3D000":
		e.msg = "no such database: " + e.msg
	case strings.HasPrefix(code, "42"), strings.HasPrefix(code, "22"), strings.HasPrefix(code, "23"),
		strings.HasPrefix(code, "P0"), strings.HasPrefix(code, "2B"), strings.HasPrefix(code, "39"):
		// Undefined or altered columns, tables and functions, type
		// mismatches, constraint violations: not what sema created.
		e.msg = "the sema tables or functions do not look as sema created them (altered or dropped?): " + e.msg
	}
}

// startupSetting reports whether SQLSTATE code, in answer to a connection's
// startup, is about a run-time setting it asked for: an unknown parameter
// (42704), a bad value (22023), or one that cannot be set now (55P02).
func startupSetting(code string) bool { return code == "42704" || code == "22023" || code == "55P02" }

// conflict reports whether err is a deadlock or a serialization failure:
// the step is retried (and counted).
func conflict(err error) bool {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	return ok && (pe.Code == "40001" || pe.Code == "40P01")
}

// transient reports whether a failed step may succeed later: the database
// was unreachable or restarting, not the request or the schema wrong.
func transient(err error) bool {
	e, ok := errors.AsType[*dbError](err)
	return ok && e.transient
}

// redactParse is pgx's complaint about a connection string, without the
// string (which may hold a password).
func redactParse(err error) string {
	s := err.Error()
	if rest, ok := strings.CutPrefix(s, "cannot parse `"); ok {
		if i := strings.LastIndex(rest, "`: "); i >= 0 {
			return "cannot parse it: " + rest[i+3:]
		}
		return "cannot parse it"
	}
	return s
}

// backoff is the pause before retry n (0, 1, …) of a step.
func backoff(n int) time.Duration {
	return min(time.Duration(1<<n)*5*time.Millisecond, 500*time.Millisecond)
}

// sleepCtx pauses for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// safeToRetry reports whether a statement provably never reached the
// server (a pooled connection found broken when written to).
func safeToRetry(err error) bool { return pgconn.SafeToRetry(err) }
