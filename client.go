package sema

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// Client gives out semaphores and mutexes over one [Backend]. It is safe for
// concurrent use.
type Client struct {
	b              Backend
	blocker        Blocker
	notifier       Notifier
	dreleaser      DeadlineReleaser
	unforced       func() // stops the backend's force-release notices, if it gives them
	log            *slog.Logger
	releaseTimeout time.Duration
	host           string
	pid            int
	owner          string
	closed         atomic.Bool
	local          bool          // the backend lives in this process (Scope process)
	monoGrants     bool          // the backend is a MonotonicGranter
	grantEpoch     time.Time     // its GrantEpoch
	grantOff       time.Duration // grantEpoch on the clock of now()
	epoch          time.Time     // base of now()
	scheds         [nScheds]sched
}

// now reads the monotonic clock only (cheaper than time.Now): the time since
// the client was made, for deadlines and durations.
func (c *Client) now() time.Duration { return time.Since(c.epoch) }

// grantTime converts the AcquiredAt of a MonotonicGranter's grant to the
// clock of now(). The difference from the backend's epoch is exact, with or
// without a monotonic reading, as AcquiredAt is the epoch plus a duration.
func (c *Client) grantTime(t time.Time) time.Duration {
	return t.Sub(c.grantEpoch) + c.grantOff
}

// New returns a client over b. The client takes b over: [Client.Close]
// closes it.
func New(b Backend, opts ...Option) *Client {
	host, _ := os.Hostname()
	if len(host) > MaxOwnerLen || checkText(host) != nil {
		host = ""
	}
	c := &Client{
		b:              b,
		log:            slog.Default(),
		releaseTimeout: DefaultReleaseTimeout,
		host:           host,
		pid:            os.Getpid(),
		epoch:          time.Now(),
	}
	c.owner = host + ":" + strconv.Itoa(c.pid)
	for i := range c.scheds {
		c.scheds[i].c = c
	}
	c.blocker, _ = b.(Blocker)
	c.notifier, _ = b.(Notifier)
	c.dreleaser, _ = b.(DeadlineReleaser)
	if mg, ok := b.(MonotonicGranter); ok {
		c.monoGrants, c.grantEpoch = true, mg.GrantEpoch()
		c.grantOff = c.grantEpoch.Sub(c.epoch)
	}
	for _, o := range opts {
		o(c)
	}
	if ValidateOwner(c.owner) != nil {
		c.owner = strconv.Itoa(c.pid)
	}
	c.local = c.Guarantees().Scope == ScopeProcess
	if fn, ok := b.(ForceNotifier); ok {
		c.unforced = fn.NotifyForced(c.forced)
	}
	return c
}

// forced is told by the backend that a lease may have been force-released:
// the lease, if it is one of this client's, renews at once to learn
// whether.
func (c *Client) forced(n ForceNotice) {
	s := c.schedFor(n.ID)
	var found *Lease
	s.mu.Lock()
	for _, l := range s.heap {
		if l.id == n.ID && l.sem.name == n.Name {
			found = l
			break
		}
	}
	s.mu.Unlock()
	if found != nil {
		found.recheck(n.By)
	}
}

// Backend returns the client's backend.
func (c *Client) Backend() Backend { return c.b }

// Semaphore returns the semaphore name with the given limit. Invalid names
// or limits are reported by its methods.
func (c *Client) Semaphore(name string, limit int64, opts ...AcquireOption) *Semaphore {
	return &Semaphore{c: c, name: name, limit: limit, opts: opts}
}

// Mutex returns the lock name: a semaphore with limit 1.
func (c *Client) Mutex(name string, opts ...AcquireOption) *Semaphore {
	return c.Semaphore(name, 1, opts...)
}

// Do runs fn while holding the mutex name; see [Semaphore.Do].
func (c *Client) Do(ctx context.Context, name string, fn func(context.Context) error, opts ...AcquireOption) error {
	return c.Mutex(name).Do(ctx, fn, opts...)
}

// Guarantees returns what the backend declares, or a zero value if it
// declares nothing.
func (c *Client) Guarantees() Guarantees {
	if d, ok := c.b.(Declarer); ok {
		return d.Guarantees()
	}
	return Guarantees{}
}

// Describe returns holders and waiters of name.
func (c *Client) Describe(ctx context.Context, name string) (Status, error) {
	if err := ValidateName(name); err != nil {
		return Status{}, err
	}
	in, ok := c.b.(Inspector)
	if !ok {
		return Status{}, fmt.Errorf("%w: backend cannot describe", ErrInvalidArgument)
	}
	return in.Describe(ctx, name)
}

// List returns every name starting with prefix that has holders or waiters.
func (c *Client) List(ctx context.Context, prefix string) ([]Status, error) {
	if len(prefix) > MaxNameLen {
		return nil, fmt.Errorf("%w: prefix longer than %d bytes", ErrInvalidName, MaxNameLen)
	}
	in, ok := c.b.(Inspector)
	if !ok {
		return nil, fmt.Errorf("%w: backend cannot list", ErrInvalidArgument)
	}
	return in.List(ctx, prefix)
}

// ForceRelease ends leases of name that the caller may not hold: the one with
// lease ID id, or all of them if id is empty. It is an admin tool: each call
// is logged at Warn level as an audit line.
//
// The leases end for their holders at once (their renewals fail with
// [ErrForceReleased]), but by default their permits are granted to nobody
// else before the leases' expiry as the backend knows it — when no holder
// can still believe its lease valid — unless a holder releases first. The
// returned holders' ExpiresAt says when that is. [ForceNow] frees the
// permits at once, for a holder known to be dead. A holder is told at once
// where the backend can tell it (a [ForceNotifier]: every backend of this
// module does), else it learns at its next renewal (within TTL/3 with
// keepalive on): its lease then ends with [ErrForceReleased] (a
// [*ForcedError] saying by whom, if it was told).
func (c *Client) ForceRelease(ctx context.Context, name, id string, opts ...ForceOption) ([]Holder, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if id != "" {
		if err := ValidateID(id); err != nil {
			return nil, err
		}
	}
	fr, ok := c.b.(ForceReleaser)
	if !ok {
		return nil, fmt.Errorf("%w: backend cannot force-release", ErrInvalidArgument)
	}
	o := ForceOptions{By: c.owner}
	for _, opt := range opts {
		opt(&o)
	}
	if err := ValidateOwner(o.By); err != nil {
		return nil, fmt.Errorf("ForceBy: %w", err)
	}
	hs, err := fr.ForceRelease(ctx, name, id, o)
	for _, h := range hs {
		c.log.Warn("sema: force-release", "name", name, "lease", h.ID, "owner", h.Owner, "token", h.Token,
			"now", o.Now, "expires", h.ExpiresAt, "by", o.By)
	}
	return hs, err
}

// Close closes the backend. Leases still held end as their renewals fail.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	if c.unforced != nil {
		c.unforced()
	}
	return c.b.Close()
}
