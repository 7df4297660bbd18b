package sema

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// Fallback re-check intervals for waiting on backends that are not Blockers.
// With a Notifier these only guard against lost wake-ups; without one they
// are the polling schedule (doubling from min to max, with jitter).
const (
	pollMin       = 2 * time.Millisecond
	pollMax       = 250 * time.Millisecond
	notifyRecheck = time.Second
)

// grant obtains a grant from the backend: at once, or waiting by the best
// means the backend offers (its own queue, an event, or bounded polling).
func (c *Client) grant(ctx context.Context, req Request, wait bool) (Grant, error) {
	if !wait {
		return c.b.TryAcquire(ctx, req)
	}
	if c.blocker != nil {
		return c.blocker.Acquire(ctx, req)
	}
	return c.poll(ctx, req)
}

// poll waits for a grant from a backend without a queue of its own: woken by
// its events if it has them, else by bounded, jittered polling.
func (c *Client) poll(ctx context.Context, req Request) (Grant, error) {
	var events <-chan struct{}
	if c.notifier != nil {
		// Subscribe before the first attempt so a release in between is seen.
		ch, cancel, err := c.notifier.Subscribe(ctx, req.Name)
		if err == nil {
			defer cancel()
			events = ch
		} else {
			c.log.Debug("sema: subscribe failed; polling", "name", req.Name, "err", err)
		}
	}
	delay := pollMin
	var timer *time.Timer
	for {
		g, err := c.b.TryAcquire(ctx, req)
		if err == nil {
			return g, nil
		}
		if !errors.Is(err, ErrNotAcquired) && !errors.Is(err, ErrUnavailable) {
			return Grant{}, err
		}
		next := delay/2 + rand.N(delay/2+1)
		if events != nil && !errors.Is(err, ErrUnavailable) {
			next = notifyRecheck
		}
		delay = min(delay*2, pollMax)
		if timer == nil {
			timer = time.NewTimer(next)
			defer timer.Stop()
		} else {
			timer.Reset(next)
		}
		select {
		case <-events:
			delay = pollMin
		case <-timer.C:
		case <-ctx.Done():
			return Grant{}, context.Cause(ctx)
		}
	}
}
