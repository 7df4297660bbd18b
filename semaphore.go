package sema

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Semaphore is a named counting semaphore with a fixed limit. A mutex is a
// Semaphore with limit 1. It is a cheap handle: it holds no state of its
// own, so any number of them may name the same semaphore.
type Semaphore struct {
	c     *Client
	name  string
	limit int64
	opts  []AcquireOption
	valid atomic.Bool                   // name and limit were checked
	def   atomic.Pointer[acquireConfig] // the checked config of a call without options
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Limit returns the semaphore's limit.
func (s *Semaphore) Limit() int64 { return s.limit }

// Acquire waits until the permits are granted or ctx is done. The context
// bounds the wait only: the lease lives on after ctx ends, until Release,
// loss, or MaxHold. On failure no permits are held; an error from ctx wraps
// both ErrNotAcquired and ctx.Err().
func (s *Semaphore) Acquire(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return s.acquire(ctx, true, opts)
}

// TryAcquire takes the permits if they are free now and never waits. If they
// are not, the error is a *[HeldError] (errors.Is ErrNotAcquired).
func (s *Semaphore) TryAcquire(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return s.acquire(ctx, false, opts)
}

// Do acquires, runs fn with the lease's context and releases after fn
// returns. fn's context is cancelled if the lease is lost; Do then returns
// fn's error joined with the loss.
func (s *Semaphore) Do(ctx context.Context, fn func(context.Context) error, opts ...AcquireOption) (err error) {
	l, err := s.Acquire(ctx, opts...)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, l.Release(context.WithoutCancel(ctx))) }()
	return fn(l.Context())
}

// Describe returns the holders and waiters of the semaphore.
func (s *Semaphore) Describe(ctx context.Context) (Status, error) {
	return s.c.Describe(ctx, s.name)
}

// config returns the checked settings of a call: the handle's options, then
// the call's. Those of a call without options are worked out once. Leases
// share the result: it is never written after.
func (s *Semaphore) config(opts []AcquireOption) (*acquireConfig, error) {
	if len(opts) == 0 {
		if def := s.def.Load(); def != nil {
			return def, nil
		}
	}
	cfg := &acquireConfig{ttl: DefaultTTL, weight: 1, keepalive: true, owner: s.c.owner}
	if len(s.opts)+len(opts) > 0 {
		for _, list := range [][]AcquireOption{s.opts, opts} {
			for _, o := range list {
				o(cfg)
			}
		}
	}
	if err := cfg.resolve(); err != nil {
		return nil, err
	}
	if err := s.validate(cfg); err != nil {
		return nil, err
	}
	if len(opts) == 0 {
		s.def.Store(cfg)
	}
	return cfg, nil
}

func (s *Semaphore) acquire(ctx context.Context, wait bool, opts []AcquireOption) (*Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, notAcquired(ctx)
	}
	if s.c.closed.Load() {
		return nil, ErrClosed
	}
	cfg, err := s.config(opts)
	if err != nil {
		return nil, err
	}
	req := Request{
		Name: s.name, Owner: cfg.owner, Limit: s.limit, Weight: cfg.weight, TTL: cfg.ttl,
		Host: s.c.host, PID: s.c.pid,
	}
	for {
		l, id := newLeaseID()
		req.ID = id
		var sent time.Duration
		if !s.c.monoGrants {
			sent = s.c.now()
		}
		g, err := s.c.grant(ctx, req, wait)
		if err != nil {
			if ctx.Err() != nil {
				// The backend may have granted just as ctx ended: give it
				// back. A Blocker gives back its own (see Blocker; the
				// conformance suite's CancelWhileWaiting checks it): a second
				// release would only keep the caller waiting on a backend
				// that does not answer.
				if !wait || s.c.blocker == nil {
					s.c.giveBack(ctx, req)
				}
				return nil, notAcquired(ctx)
			}
			return nil, err
		}
		var deadline time.Duration
		if s.c.monoGrants {
			// The backend dated the grant on this process's clock.
			sent = s.c.grantTime(g.AcquiredAt)
			deadline = sent + cfg.ttl - cfg.margin
		} else {
			// The backend granted no earlier than sent+Waited (by its
			// clock); allow 0.1% rate difference between the two clocks.
			deadline = sent + g.Waited - g.Waited/1000 + cfg.ttl - cfg.margin
		}
		if ctx.Err() != nil {
			s.c.giveBack(ctx, req)
			return nil, notAcquired(ctx)
		}
		now := sent
		if !s.c.local || g.Waited > 0 {
			// A grant may arrive late (the network, a long queue): one
			// already past its deadline is given back. An in-process backend
			// that granted at once needs no second look at the clock: a
			// stall in between is no different from one just after Acquire
			// returns, which the lease's deadline covers (it fires at once).
			now = s.c.now()
			if now >= deadline {
				s.c.giveBack(ctx, req)
				if !wait {
					return nil, fmt.Errorf("%w: grant arrived after its safe window", ErrUnavailable)
				}
				continue
			}
		}
		return l.start(s, &g, cfg, now, deadline, ctx), nil
	}
}

// validate checks what Request.Validate would, once per handle for the name
// and limit (the backend checks the whole request again).
func (s *Semaphore) validate(cfg *acquireConfig) error {
	if !s.valid.Load() {
		if err := ValidateName(s.name); err != nil {
			return err
		}
		if err := ValidateLimit(s.limit); err != nil {
			return err
		}
		s.valid.Store(true)
	}
	if cfg.weight < 1 || cfg.weight > s.limit {
		return fmt.Errorf("%w: weight %d out of range [1, limit %d]", ErrInvalidArgument, cfg.weight, s.limit)
	}
	if cfg.owner != s.c.owner { // the default was checked by New
		return ValidateOwner(cfg.owner)
	}
	return nil
}

func notAcquired(ctx context.Context) error {
	return errors.Join(ErrNotAcquired, context.Cause(ctx))
}

// giveBack releases a grant the caller will not use, as Release does.
func (c *Client) giveBack(ctx context.Context, req Request) {
	if err := c.release(ctx, req.Name, req.ID); err != nil && !errors.Is(err, ErrNotHeld) {
		c.log.Warn("sema: giving back an unused grant failed", "name", req.Name, "lease", req.ID, "err", err)
	}
}
