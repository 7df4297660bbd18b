// Package sema gives programs named locks and counting semaphores that stay
// safe when a holder crashes or stalls, hand over fast and fairly under
// contention, and can be watched while they work.
//
// A [Client] wraps one [Backend]. [Client.Semaphore] names a semaphore with
// a limit; [Client.Mutex] is the same with limit 1. Acquire grants a
// [Lease]: a name, a random lease ID, a fencing token, an owner label, a
// weight and an expiry. The lease renews itself until released:
//
//	c := sema.New(mem.New())
//	lease, err := c.Mutex("nightly").Acquire(ctx)
//	if err != nil { … }
//	defer lease.Release(ctx)
//	work(lease.Context(), lease.Token())
//
// # Guarantees
//
// Every backend in this module keeps the same contract, checked by the
// conformance suite in package backendtest:
//
//   - Names are 1–255 bytes of UTF-8 without control characters or
//     invisible format characters (bidi overrides, zero-width) and never
//     become paths or queries unescaped ([ErrInvalidName]).
//   - Safety: at every instant the weights of a name's live leases sum to at
//     most its limit. Holders of a name agree on the limit
//     ([ErrLimitMismatch]).
//   - Tokens are strictly increasing per name over every grant (see each
//     backend's Guarantees for whether that survives a backend restart).
//   - Expiry is decided by the backend's clock. The client also keeps a local
//     deadline on its monotonic clock, measured from when the grant or last
//     renewal was sent (from the grant itself for an in-process backend that
//     dates grants on that clock, a [MonotonicGranter]): at
//     sent + TTL − margin without a confirmed renewal
//     the lease's context is cancelled and [Lease.Done] closes — before the
//     backend can give the permits to anyone else, even if it never answers
//     again.
//   - Keepalive renews every TTL/3 and retries transient errors only while
//     the lease is provably valid; [Lease.Release] stops it synchronously.
//   - Refresh is compare-and-extend on the lease ID and never re-creates a
//     lost lease ([ErrLeaseLost]). Release acts on the lease ID only, is
//     idempotent, never touches a newer lease of the same name, and runs on
//     its own bounded context.
//   - Acquire waits until granted or its context is done; an already-done
//     context always fails; a grant that races with cancellation is given
//     back. Backends that can order waiters serve them FIFO, and a later,
//     smaller request never overtakes an earlier one. A release wakes the
//     next waiter by an event; polling is only a bounded fallback.
//
// # Caveats
//
//   - A lease can be lost at any time. Code that must not run without the
//     lock checks [Lease.Context] and passes [Lease.Token] to the resource
//     it protects, so that the resource can refuse a stale holder: only a
//     fencing token makes exclusion hold against a holder that stalls past
//     its TTL between checking and writing.
//   - The local deadline assumes the client's and the backend's clocks run at
//     the same rate (not that they agree on the time); the margin (TTL/5 by
//     default) absorbs drift and scheduling delays.
//   - Backends differ in reach and strength; each declares its
//     [Guarantees]. The memory backend protects goroutines of one process
//     only.
//
// # Backends
//
//   - backend/mem (mem://): one process, FIFO, the reference implementation.
//   - backend/file (file:///dir): the processes of one host, no daemon; a
//     holder that dies frees its permits at once.
//   - backend/remote (http(s)://host:port): many hosts, through the
//     `sema serve` server and its durable embedded store.
//
// Errors wrap the sentinels in errors.go; check them with [errors.Is].
package sema
