// Package wire holds what the sema server (internal/server) and its Go
// client (backend/remote) share: the JSON types of the HTTP/JSON API v1,
// their encoders and decoders (encode.go, decode.go, lease.go) and the
// sema-mux framing (mux.go).
//
// Fields are snake_case, times are RFC 3339 with nanoseconds, durations are
// integer milliseconds (fields ending in _ms). Every answer is an
// [Envelope]; clients always decode it and act on Error if present, whatever
// the HTTP status (after long-poll heartbeats an error arrives inside a 200).
package wire

import (
	"time"

	"github.com/sema-dev/sema"
)

// Defaults the server applies to absent (zero) request fields.
const (
	DefaultLimit     = 1
	DefaultWeight    = 1
	DefaultTTLMillis = 15000
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 64 << 10

// API paths.
const (
	PathAcquire      = "/v1/acquire"
	PathRenew        = "/v1/renew"
	PathRelease      = "/v1/release"
	PathLocks        = "/v1/locks"  // GET ?prefix=P (admin)
	PathLock         = "/v1/locks/" // + url.PathEscape(name)
	PathForceRelease = "/v1/force-release"
	PathGuarantees   = "/v1/guarantees"
	PathHealth       = "/healthz"
	PathMetrics      = "/metrics"
)

// AcquireRequest is the body of POST /v1/acquire.
type AcquireRequest struct {
	Name       string `json:"name"`
	Limit      int64  `json:"limit"`             // default 1 when 0/absent
	Weight     int64  `json:"weight"`            // default 1 when 0/absent
	TTLMillis  int64  `json:"ttl_ms"`            // default 15000 when 0/absent
	Owner      string `json:"owner,omitempty"`   // human label
	ID         string `json:"id,omitempty"`      // lease ID = idempotency key; generated if absent
	WaitMillis int64  `json:"wait_ms,omitempty"` // 0: try only; >0: long-poll up to this (server caps it)
	Host       string `json:"host,omitempty"`
	PID        int    `json:"pid,omitempty"`
}

// RenewRequest is the body of POST /v1/renew.
type RenewRequest struct {
	Name      string `json:"name"`
	ID        string `json:"id"`
	TTLMillis int64  `json:"ttl_ms"` // default 15000 when 0/absent
}

// ReleaseRequest is the body of POST /v1/release.
type ReleaseRequest struct {
	Name string `json:"name"`
	ID   string `json:"id"`
}

// ForceReleaseRequest is the body of POST /v1/force-release. With no ID
// every holder of Name is released. Now frees the permits at once (see
// sema.ForceOptions); by default they free at the leases' expiry.
type ForceReleaseRequest struct {
	Name string `json:"name"`
	ID   string `json:"id,omitempty"`
	Now  bool   `json:"now,omitempty"`
	By   string `json:"by,omitempty"` // who asks, as the caller names itself
}

// ForceReleaseResponse is the answer to POST /v1/force-release.
type ForceReleaseResponse struct {
	Released []sema.Holder `json:"released"`
}

// ListResponse is the answer to GET /v1/locks?prefix=P.
type ListResponse struct {
	Locks []sema.Status `json:"locks"`
}

// Lease is a granted or renewed lease.
type Lease struct {
	Name       string    `json:"name"`
	ID         string    `json:"id"`
	Token      uint64    `json:"token"`
	Owner      string    `json:"owner"`
	Weight     int64     `json:"weight"`
	Limit      int64     `json:"limit"`
	AcquiredAt time.Time `json:"acquired_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	TTLMillis  int64     `json:"ttl_ms"`
	// WaitedMillis is the server-side time between receiving the request
	// and granting it, in fractional milliseconds.
	WaitedMillis float64 `json:"waited_ms"`
}

// Error is the body of every failure.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Reason refines lease_lost: "expired" or "force_released".
	Reason  string        `json:"reason,omitempty"`
	Limit   int64         `json:"limit,omitempty"`
	Holders []sema.Holder `json:"holders,omitempty"`
	Waiters int           `json:"waiters,omitempty"`
}

// Envelope wraps every lease answer: exactly one of Lease or Error is set
// (release answers {}).
type Envelope struct {
	Lease *Lease `json:"lease,omitempty"`
	Error *Error `json:"error,omitempty"`
	// AlreadyReleased answers a release of a lease the caller released
	// moments before: a success, as the first one was.
	AlreadyReleased bool `json:"already_released,omitempty"`
}

// Error codes (the "code" field) and the HTTP status the server uses for
// each when it can still choose one.
const (
	CodeNotAcquired     = "not_acquired"         // 409, sema.ErrNotAcquired (*sema.HeldError)
	CodeLimitMismatch   = "limit_mismatch"       // 409, sema.ErrLimitMismatch
	CodeLeaseLost       = "lease_lost"           // 410, sema.ErrLeaseLost
	CodeNotHeld         = "not_held"             // 404, sema.ErrNotHeld
	CodeInvalidName     = "invalid_name"         // 400, sema.ErrInvalidName
	CodeInvalidArgument = "invalid_argument"     // 400, sema.ErrInvalidArgument
	CodeBadRequest      = "bad_request"          // 400, sema.ErrInvalidArgument (malformed JSON, unknown field)
	CodeTooLarge        = "too_large"            // 413, sema.ErrInvalidArgument
	CodeUnauthorized    = "unauthorized"         // 401, missing or unknown token
	CodeForbidden       = "forbidden"            // 403, role or lease owner mismatch
	CodeNotFound        = "not_found"            // 404, no such route
	CodeMethod          = "method_not_allowed"   // 405
	CodeTooManyWaiters  = "too_many_waiters"     // 429, a bound on waiting acquires (sema.ErrUnavailable)
	CodeTooManyConns    = "too_many_connections" // 429, a bound on sema-mux connections
	CodeUnavailable     = "unavailable"          // 503, sema.ErrUnavailable
	CodeClosed          = "closed"               // 503, sema.ErrClosed
	CodeInternal        = "internal"             // 500, sema.ErrUnavailable
)

// Reasons for lease_lost.
const (
	ReasonExpired       = "expired"
	ReasonForceReleased = "force_released"
)

// HTTPStatus maps every error code to the HTTP status the server answers
// with when the status line has not been committed yet (before a long-poll
// heartbeat). It is the code table of the API; api/openapi.yaml lists the
// same codes.
var HTTPStatus = map[string]int{
	CodeNotAcquired:     409,
	CodeLimitMismatch:   409,
	CodeLeaseLost:       410,
	CodeNotHeld:         404,
	CodeInvalidName:     400,
	CodeInvalidArgument: 400,
	CodeBadRequest:      400,
	CodeTooLarge:        413,
	CodeUnauthorized:    401,
	CodeForbidden:       403,
	CodeNotFound:        404,
	CodeMethod:          405,
	CodeTooManyWaiters:  429,
	CodeTooManyConns:    429,
	CodeUnavailable:     503,
	CodeClosed:          503,
	CodeInternal:        500,
}
