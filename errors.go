package sema

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every error returned by this package and by a conforming
// backend wraps one of them; check with [errors.Is].
var (
	// ErrNotAcquired means the permits were not free: TryAcquire found the
	// name held, or Acquire's context ended first. A *[HeldError] carrying
	// the current holders unwraps to it.
	ErrNotAcquired = errors.New("sema: not acquired")

	// ErrLeaseLost means a lease is no longer held: it expired, was
	// force-released, or its backend stopped confirming it. [ErrExpired],
	// [ErrForceReleased] and [ErrMaxHold] are more precise forms of it.
	ErrLeaseLost = errors.New("sema: lease lost")

	// ErrNotHeld means a backend has no live lease with the given ID, or an
	// admin force-release found nothing to release.
	ErrNotHeld = errors.New("sema: not held")

	// ErrLimitMismatch means a request's limit differs from the limit the
	// current holders or waiters of the name agreed on.
	ErrLimitMismatch = errors.New("sema: limit mismatch")

	// ErrInvalidName means a name is empty, longer than [MaxNameLen] bytes,
	// not UTF-8, or contains control or invisible format characters.
	ErrInvalidName = errors.New("sema: invalid name")

	// ErrInvalidArgument means a limit, weight, TTL, owner label or other
	// option is out of range.
	ErrInvalidArgument = errors.New("sema: invalid argument")

	// ErrUnavailable means the backend could not be reached or answered
	// with an error that says nothing about the lease.
	ErrUnavailable = errors.New("sema: backend unavailable")

	// ErrPermission means the backend refused the caller: a missing or
	// wrong credential, or a lease that belongs to someone else. Retrying
	// does not help.
	ErrPermission = errors.New("sema: permission denied")

	// ErrClosed means the client or backend was closed.
	ErrClosed = errors.New("sema: closed")

	// ErrReleased is the reason [Lease.Err] reports after [Lease.Release].
	ErrReleased = errors.New("sema: lease released")
)

// More precise forms of ErrLeaseLost, reported by [Lease.Err]. Each one
// satisfies errors.Is(err, ErrLeaseLost).
var (
	// ErrExpired: the local deadline passed without a confirmed renewal, or
	// the backend reports the lease expired.
	ErrExpired error = &lostError{"sema: lease expired"}
	// ErrForceReleased: an admin force-released the lease.
	ErrForceReleased error = &lostError{"sema: lease force-released"}
	// ErrMaxHold: the lease reached its MaxHold; renewal stopped.
	ErrMaxHold error = &lostError{"sema: lease reached its max hold time"}
)

// ForcedError is how a lease ended whose holder was told who
// force-released it (see [ForceNotifier]). It satisfies errors.Is(err,
// ErrForceReleased).
type ForcedError struct {
	By string // ForceOptions.By of the force-release
}

func (e *ForcedError) Error() string { return "sema: lease force-released by " + e.By }
func (e *ForcedError) Unwrap() error { return ErrForceReleased }

type lostError struct{ msg string }

func (e *lostError) Error() string        { return e.msg }
func (e *lostError) Is(target error) bool { return target == ErrLeaseLost }

// HeldError is returned when permits are not free. It unwraps to
// [ErrNotAcquired] and carries who holds the name at the time of the attempt.
type HeldError struct {
	Name    string
	Limit   int64
	Holders []Holder
	Waiters int
}

func (e *HeldError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sema: not acquired: %q", e.Name)
	if len(e.Holders) > 0 {
		var used int64
		for _, h := range e.Holders {
			used += h.Weight
		}
		fmt.Fprintf(&b, " held (%d/%d) by ", used, e.Limit)
		for i, h := range e.Holders {
			if i == 3 {
				fmt.Fprintf(&b, ", and %d more", len(e.Holders)-3)
				break
			}
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q (token %d)", h.Owner, h.Token)
		}
	}
	if e.Waiters > 0 {
		fmt.Fprintf(&b, ", %d waiting", e.Waiters)
	}
	return b.String()
}

// Unwrap returns ErrNotAcquired.
func (e *HeldError) Unwrap() error { return ErrNotAcquired }
