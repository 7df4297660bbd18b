package sema

import (
	"fmt"
	"log/slog"
	"time"
)

// Defaults for acquire options.
const (
	DefaultTTL            = 15 * time.Second
	DefaultReleaseTimeout = 5 * time.Second
)

// Option configures a [Client].
type Option func(*Client)

// WithLogger sets the logger for lease events (renewal failures, losses,
// force-releases). Default: slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) {
		if l != nil {
			c.log = l
		}
	}
}

// WithReleaseTimeout bounds each Release, which runs on its own context
// detached from the caller's. Default: DefaultReleaseTimeout.
func WithReleaseTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.releaseTimeout = d
		}
	}
}

// WithOwnerDefault sets the owner label used when an acquire gives none.
// Default: "host:pid".
func WithOwnerDefault(owner string) Option {
	return func(c *Client) { c.owner = owner }
}

// AcquireOption configures one acquisition. Options given to
// [Client.Semaphore] apply to every acquisition of it; options given to
// Acquire override them.
type AcquireOption func(*acquireConfig)

type acquireConfig struct {
	ttl       time.Duration
	owner     string
	weight    int64
	maxHold   time.Duration
	keepalive bool
	interval  time.Duration // 0: ttl/3
	margin    time.Duration // 0: ttl/5
}

// WithTTL sets the lease's time to live on the backend (default 15 s). With
// keepalive on (the default) the lease renews itself every TTL/3.
func WithTTL(d time.Duration) AcquireOption { return func(c *acquireConfig) { c.ttl = d } }

// WithOwner sets the owner label shown to other clients (≤ 255 bytes).
func WithOwner(owner string) AcquireOption { return func(c *acquireConfig) { c.owner = owner } }

// WithWeight asks for w permits (1 ≤ w ≤ limit; default 1).
func WithWeight(w int64) AcquireOption { return func(c *acquireConfig) { c.weight = w } }

// WithMaxHold stops renewing the lease d after it was granted and cancels
// its context then: a hung holder cannot keep a lease forever.
func WithMaxHold(d time.Duration) AcquireOption { return func(c *acquireConfig) { c.maxHold = d } }

// WithoutKeepalive turns automatic renewal off: the lease lives for its TTL
// unless [Lease.Refresh] extends it.
func WithoutKeepalive() AcquireOption { return func(c *acquireConfig) { c.keepalive = false } }

// WithRenewInterval sets how often keepalive renews (default TTL/3).
func WithRenewInterval(d time.Duration) AcquireOption {
	return func(c *acquireConfig) { c.interval = d }
}

// WithSafetyMargin sets how long before the backend could expire the lease
// the local deadline cancels the lease's context (default TTL/5).
func WithSafetyMargin(d time.Duration) AcquireOption {
	return func(c *acquireConfig) { c.margin = d }
}

func (c *acquireConfig) resolve() error {
	if err := ValidateTTL(c.ttl); err != nil {
		return err
	}
	if c.interval == 0 {
		c.interval = c.ttl / 3
	}
	if c.margin == 0 {
		c.margin = c.ttl / 5
	}
	switch {
	case c.interval < 0 || c.margin < 0 || c.maxHold < 0:
		return fmt.Errorf("%w: negative duration", ErrInvalidArgument)
	case c.interval+c.margin >= c.ttl:
		return fmt.Errorf("%w: renew interval %v + safety margin %v must be below ttl %v",
			ErrInvalidArgument, c.interval, c.margin, c.ttl)
	}
	return nil
}

// ForceOption configures one [Client.ForceRelease].
type ForceOption func(*ForceOptions)

// ForceNow frees the force-released permits at once instead of at the
// leases' expiry. Use it only for a holder known to be dead: one still
// running may go on beside the next holder until it learns of the loss.
func ForceNow() ForceOption { return func(o *ForceOptions) { o.Now = true } }

// ForceBy names who force-releases, for the holders told of it (see
// [ForceNotifier]): "force-released by LABEL". Default: the client's owner
// label (see [WithOwnerDefault]).
func ForceBy(label string) ForceOption { return func(o *ForceOptions) { o.By = label } }
