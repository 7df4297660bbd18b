package sema

import (
	"context"
	"time"
)

// Backend is the contract between the sema core and a storage engine. The
// core owns policy (waiting, retries, keepalive, the local deadline); a
// backend owns atomicity: each method is one atomic step on the backend's
// own clock.
//
// Implementers, in order:
//  1. Check every request with [Request.Validate] (or the core's validation
//     will be the only guard) and return errors wrapping the sentinels in
//     errors.go.
//  2. TryAcquire never waits. Contention is a *[HeldError]; anything else
//     (network, disk) is another error, ideally wrapping [ErrUnavailable].
//  3. A grant is stored under Request.ID, chosen by the core. A TryAcquire
//     repeating the ID of a live lease returns that lease unchanged
//     (idempotent retry), never a second one.
//  4. Tokens are strictly increasing per name over every grant ever made,
//     also across backend restarts, unless Guarantees says otherwise.
//  5. Renew is compare-and-extend on the lease ID; it never re-creates a
//     lease (→ an error wrapping [ErrLeaseLost]).
//  6. Release acts on the lease ID only; releasing an unknown or expired ID
//     returns an error wrapping [ErrNotHeld] and changes nothing.
//  7. Add an interface guard (var _ sema.Backend = (*Backend)(nil)) for
//     Backend and every optional interface, and call
//     backendtest.Run from the backend's tests.
type Backend interface {
	TryAcquire(ctx context.Context, req Request) (Grant, error)
	Renew(ctx context.Context, name, id string, ttl time.Duration) (Grant, error)
	Release(ctx context.Context, name, id string) error
	Close() error
}

// Blocker is implemented by backends that queue waiters themselves (in FIFO
// order where Guarantees.FIFO says so). Acquire waits until the request is
// granted or ctx is done; a grant that races with cancellation must be given
// back by the backend. Grant.Waited reports how long the backend held the
// request before granting it, measured on the backend's monotonic clock.
type Blocker interface {
	Acquire(ctx context.Context, req Request) (Grant, error)
}

// Notifier is implemented by backends that can signal that permits of a name
// may have become free (pub/sub, LISTEN/NOTIFY, watch, inotify). The core
// subscribes before each TryAcquire, so a release between the attempt and
// the wait is not lost. The channel may fire spuriously; it is closed or
// abandoned when cancel is called. The core still re-checks on a bounded
// fallback timer in case a signal is lost.
type Notifier interface {
	Subscribe(ctx context.Context, name string) (ch <-chan struct{}, cancel func(), err error)
}

// Inspector is implemented by backends that can show holders and waiters.
type Inspector interface {
	// Describe returns the state of one name. A name nobody holds or waits
	// for has a Status with no holders, not an error.
	Describe(ctx context.Context, name string) (Status, error)
	// List returns the names starting with prefix that have holders or
	// waiters, sorted by name.
	List(ctx context.Context, prefix string) ([]Status, error)
}

// ForceReleaser is implemented by backends that let an admin end leases they
// do not hold. With id == "" every holder of name is released. It returns
// the released holders, or an error wrapping [ErrNotHeld] if there were none.
//
// The lease ends for its holder at once: its next Renew fails with an error
// wrapping [ErrForceReleased]. Unless opts.Now is set, its permits stay
// taken until the lease's expiry as the backend knows it (a lock-delay: the
// holder may still believe the lease valid until then), or until its holder
// releases it; that Release frees them and returns an error wrapping
// [ErrForceReleased]. Describe shows such a holder with
// [Holder.ForceReleased] set. A default force-release of a lease already
// force-released returns it again and changes nothing; with opts.Now it
// frees its permits. With opts.Now the permits go to the waiters at once.
// An acquire repeating the ID of a force-released lease (a retry) is
// never answered with that lease: it fails with an error wrapping
// [ErrForceReleased], or, once the lease is gone, is a new grant that
// holds its permits, with a greater token.
type ForceReleaser interface {
	ForceRelease(ctx context.Context, name, id string, opts ForceOptions) ([]Holder, error)
}

// ForceNotifier is implemented by backends that tell a lease's holder as
// soon as an admin force-releases it, sooner than its next renewal would.
// The client registers f once; the backend calls it for each lease a
// force-release ended (it may also call it for leases this client does
// not hold: the client ignores them), from a goroutine of its own (f does
// not block). A call may be spurious: the client then renews the lease at
// once, and the renewal says whether it is over. stop ends the calls.
type ForceNotifier interface {
	NotifyForced(f func(ForceNotice)) (stop func())
}

// ForceNotice tells of a force-released lease: its name, its ID, and who
// force-released it (ForceOptions.By, "" if not known).
type ForceNotice struct {
	Name, ID, By string
}

// ForceOptions tells a [ForceReleaser] how to end leases; the zero value is
// the safe default. Callers of [Client.ForceRelease] set it with
// [ForceOption]s.
type ForceOptions struct {
	// Now frees the permits at once instead of at the lease's expiry: for
	// an operator who knows the holder is dead.
	Now bool
	// By names who force-releases (a label such as user@host, at most
	// MaxOwnerLen bytes), for the holders a [ForceNotifier] tells.
	By string
}

// Declarer is implemented by backends that declare their guarantees. Every
// backend in this module does.
type Declarer interface {
	Guarantees() Guarantees
}

// DeadlineReleaser is implemented by backends that bound a release by a
// deadline themselves (a connection deadline, say), more cheaply than a
// context with a timeout would. ReleaseBy is Release, given up at deadline;
// it ignores ctx's cancellation and uses ctx for its values only (the core
// passes one without). The core calls it, when offered, for
// [Lease.Release].
type DeadlineReleaser interface {
	ReleaseBy(ctx context.Context, name, id string, deadline time.Time) error
}

// MonotonicGranter is implemented by in-process backends that date grants
// on this process's monotonic clock: Grant.AcquiredAt is GrantEpoch().Add(d),
// where GrantEpoch returns a fixed value of time.Now and d is the time of the
// grant since then, and the lease expires no earlier than d + TTL by that
// clock. The client then dates the lease's local deadline from that very
// instant instead of reading the clock before each call.
type MonotonicGranter interface {
	GrantEpoch() time.Time
}

// Scope says how far a backend's exclusion reaches.
type Scope string

// Scopes.
const (
	ScopeProcess Scope = "process" // goroutines of one process
	ScopeHost    Scope = "host"    // processes of one host
	ScopeCluster Scope = "cluster" // processes on many hosts
)

// Guarantees is what a backend promises, declared in code so that tests and
// users can check it.
type Guarantees struct {
	Scope Scope `json:"scope"`
	// FIFO: waiters are granted in arrival order and a later, smaller
	// request never overtakes an earlier one.
	FIFO bool `json:"fifo"`
	// Linearizable: every operation takes effect atomically at one point
	// between its call and its return, for all clients.
	Linearizable bool `json:"linearizable"`
	// DurableFencing: tokens never go back, even after the backend restarts.
	DurableFencing bool `json:"durable_fencing"`
	// SurvivesFailover: leases and tokens survive the loss of a server
	// (replication with acknowledgement).
	SurvivesFailover bool `json:"survives_failover"`
	// Wakeup names the event that wakes waiters ("in-process", "long-poll",
	// "pub/sub", …).
	Wakeup string `json:"wakeup"`
	// Notes are caveats in one or two sentences.
	Notes string `json:"notes,omitempty"`
}

// Request asks a backend for Weight permits of the semaphore Name with
// limit Limit, for TTL.
type Request struct {
	Name   string
	ID     string // lease ID chosen by the core: random, unique per acquisition
	Owner  string // human label, ≤ MaxOwnerLen bytes
	Limit  int64
	Weight int64
	TTL    time.Duration
	Host   string // where the holder runs (informational)
	PID    int    // the holder's process ID (informational)
}

// Grant is a backend's answer to an acquire or renew. Times are on the
// backend's clock.
type Grant struct {
	Name       string
	ID         string
	Token      uint64
	Owner      string
	Weight     int64
	Limit      int64
	AcquiredAt time.Time
	ExpiresAt  time.Time
	// Waited is how long a Blocker held the request before granting it, on
	// the backend's monotonic clock. Zero for TryAcquire and Renew.
	Waited time.Duration
}

// Holder describes one live lease.
type Holder struct {
	ID         string    `json:"id,omitempty"`
	Owner      string    `json:"owner"`
	Token      uint64    `json:"token"`
	Weight     int64     `json:"weight"`
	AcquiredAt time.Time `json:"acquired_at"`
	RenewedAt  time.Time `json:"renewed_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	Host       string    `json:"host,omitempty"`
	PID        int       `json:"pid,omitempty"`
	// ForceReleased: an admin force-released the lease; it is over for its
	// holder, and its permits free at ExpiresAt or when its holder releases
	// it, whichever comes first.
	ForceReleased bool `json:"force_released,omitempty"`
}

// WaiterInfo describes one queued request.
type WaiterInfo struct {
	Owner  string    `json:"owner"`
	Weight int64     `json:"weight"`
	Since  time.Time `json:"since"`
	Host   string    `json:"host,omitempty"`
	PID    int       `json:"pid,omitempty"`
}

// Status is the state of one name.
type Status struct {
	Name    string       `json:"name"`
	Limit   int64        `json:"limit"` // 0 when nobody holds or waits
	Used    int64        `json:"used"`  // sum of the holders' weights
	Holders []Holder     `json:"holders"`
	Waiters []WaiterInfo `json:"waiters"`
}
