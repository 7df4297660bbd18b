package server

import (
	"errors"
	"net/http"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/store"
	"github.com/sema-dev/sema/internal/wire"
)

// Errors of the HTTP layer, mapped to codes like the sentinels.
var (
	errUnauthorized = errors.New("missing or unknown bearer token")
	errForbidden    = errors.New("this token's role may not do that")
	errNotFound     = errors.New("no such endpoint")
	errMethod       = errors.New("method not allowed")
	errTooLarge     = errors.New("request body larger than 64 KiB")
)

// toWire maps an error to its wire form and HTTP status. admin decides
// whether holders' lease IDs are shown.
func toWire(err error, admin bool) (*wire.Error, int) {
	e := &wire.Error{Code: wire.CodeInternal, Message: err.Error()}
	var held *sema.HeldError
	switch {
	case errors.Is(err, errUnauthorized):
		e.Code = wire.CodeUnauthorized
	case errors.Is(err, errForbidden), errors.Is(err, store.ErrForbidden):
		e.Code = wire.CodeForbidden
	case errors.Is(err, errNotFound):
		e.Code = wire.CodeNotFound
	case errors.Is(err, errMethod):
		e.Code = wire.CodeMethod
	case errors.Is(err, errTooLarge):
		e.Code = wire.CodeTooLarge
	case errors.Is(err, errBadRequest):
		e.Code = wire.CodeBadRequest
	case errors.Is(err, errTooManyWaiters):
		e.Code = wire.CodeTooManyWaiters
	case errors.Is(err, errTooManyConns):
		e.Code = wire.CodeTooManyConns
	case errors.As(err, &held):
		e.Code = wire.CodeNotAcquired
		e.Limit, e.Waiters = held.Limit, held.Waiters
		e.Holders = redact(held.Holders, admin)
	case errors.Is(err, sema.ErrLimitMismatch):
		e.Code = wire.CodeLimitMismatch
	case errors.Is(err, sema.ErrLeaseLost):
		e.Code, e.Reason = wire.CodeLeaseLost, wire.ReasonExpired
		if errors.Is(err, sema.ErrForceReleased) {
			e.Reason = wire.ReasonForceReleased
		}
	case errors.Is(err, sema.ErrNotHeld):
		e.Code = wire.CodeNotHeld
	case errors.Is(err, sema.ErrInvalidName):
		e.Code = wire.CodeInvalidName
	case errors.Is(err, sema.ErrInvalidArgument):
		e.Code = wire.CodeInvalidArgument
	case errors.Is(err, sema.ErrClosed):
		e.Code = wire.CodeClosed
	case errors.Is(err, sema.ErrNotAcquired):
		e.Code = wire.CodeNotAcquired
	case errors.Is(err, sema.ErrUnavailable):
		e.Code = wire.CodeUnavailable
	}
	status := wire.HTTPStatus[e.Code]
	if status == 0 {
		status = http.StatusInternalServerError
	}
	return e, status
}

// redact hides lease IDs from non-admins: knowing one lets a client of the
// same token release the lease.
func redact(hs []sema.Holder, admin bool) []sema.Holder {
	if admin || len(hs) == 0 {
		return hs
	}
	out := make([]sema.Holder, len(hs))
	for i, h := range hs {
		h.ID = ""
		out[i] = h
	}
	return out
}

func redactStatus(st sema.Status, admin bool) sema.Status {
	st.Holders = redact(st.Holders, admin)
	if st.Holders == nil {
		st.Holders = []sema.Holder{}
	}
	if st.Waiters == nil {
		st.Waiters = []sema.WaiterInfo{}
	}
	return st
}
