package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/store"
)

// engine is what the handlers need from the store they serve.
type engine interface {
	acquire(ctx context.Context, req sema.Request, who store.Caller, wait bool) (sema.Grant, error)
	// acquireNow answers req if it needs no wait in the queue (done);
	// otherwise it changes nothing and the caller waits with acquire.
	acquireNow(ctx context.Context, req sema.Request, who store.Caller) (g sema.Grant, done bool, err error)
	renew(ctx context.Context, name, id string, ttl time.Duration, who store.Caller) (sema.Grant, error)
	release(ctx context.Context, name, id string, who store.Caller) error
}

// storeEngine serves the embedded store, which binds leases to principals
// itself (durably).
type storeEngine struct{ s *store.Store }

func (e storeEngine) acquire(ctx context.Context, req sema.Request, who store.Caller, wait bool) (sema.Grant, error) {
	return e.s.AcquireAs(ctx, req, who, wait)
}

func (e storeEngine) acquireNow(ctx context.Context, req sema.Request, who store.Caller) (sema.Grant, bool, error) {
	g, granted, err := e.s.AcquireNow(ctx, req, who)
	return g, granted || err != nil, err
}

func (e storeEngine) renew(ctx context.Context, name, id string, ttl time.Duration, who store.Caller) (sema.Grant, error) {
	return e.s.RenewAs(ctx, name, id, ttl, who)
}

func (e storeEngine) release(ctx context.Context, name, id string, who store.Caller) error {
	return e.s.ReleaseAs(ctx, name, id, who)
}

// backendEngine serves any sema.Backend. It binds leases to principals in
// memory: after a restart of the server, a lease it did not grant can be
// renewed or released by any client that knows its ID.
type backendEngine struct {
	b       sema.Backend
	blocker sema.Blocker
	notify  sema.Notifier

	mu      sync.Mutex
	owners  map[string]binding // name\x00id → who acquired it
	inserts int
}

type binding struct {
	principal string
	expires   time.Time
}

func newBackendEngine(b sema.Backend) *backendEngine {
	e := &backendEngine{b: b, owners: make(map[string]binding)}
	e.blocker, _ = b.(sema.Blocker)
	e.notify, _ = b.(sema.Notifier)
	return e
}

func (e *backendEngine) check(name, id string, who store.Caller) error {
	if who.Admin {
		return nil
	}
	e.mu.Lock()
	bd, ok := e.owners[name+"\x00"+id]
	e.mu.Unlock()
	if ok && bd.principal != who.Principal {
		return fmt.Errorf("server: lease %q: %w", name, store.ErrForbidden)
	}
	return nil
}

func (e *backendEngine) bind(g sema.Grant, principal string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.owners[g.Name+"\x00"+g.ID] = binding{principal: principal, expires: g.ExpiresAt}
	if e.inserts++; e.inserts >= 1024 && e.inserts >= len(e.owners) {
		e.inserts = 0
		now := time.Now()
		for k, bd := range e.owners {
			if now.After(bd.expires) {
				delete(e.owners, k)
			}
		}
	}
}

func (e *backendEngine) unbind(name, id string) {
	e.mu.Lock()
	delete(e.owners, name+"\x00"+id)
	e.mu.Unlock()
}

func (e *backendEngine) acquire(ctx context.Context, req sema.Request, who store.Caller, wait bool) (sema.Grant, error) {
	if err := e.check(req.Name, req.ID, who); err != nil {
		return sema.Grant{}, err
	}
	var g sema.Grant
	var err error
	switch {
	case !wait:
		g, err = e.b.TryAcquire(ctx, req)
	case e.blocker != nil:
		g, err = e.blocker.Acquire(ctx, req)
	default:
		g, err = e.poll(ctx, req)
	}
	if err == nil {
		e.bind(g, who.Principal)
	}
	return g, err
}

// acquireNow never answers: a generic backend cannot tell a wait from a
// refusal without side effects, so every waiting acquire long-polls.
func (e *backendEngine) acquireNow(context.Context, sema.Request, store.Caller) (sema.Grant, bool, error) {
	return sema.Grant{}, false, nil
}

// poll waits on a backend that does not queue waiters: on its events if it
// has them, re-checking on a bounded, jittered schedule.
func (e *backendEngine) poll(ctx context.Context, req sema.Request) (sema.Grant, error) {
	var events <-chan struct{}
	if e.notify != nil {
		if ch, cancel, err := e.notify.Subscribe(ctx, req.Name); err == nil {
			defer cancel()
			events = ch
		}
	}
	delay := 2 * time.Millisecond
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for {
		g, err := e.b.TryAcquire(ctx, req)
		if err == nil || !errors.Is(err, sema.ErrNotAcquired) {
			return g, err
		}
		next := delay/2 + rand.N(delay/2+1)
		if events != nil {
			next = time.Second
		}
		delay = min(2*delay, 250*time.Millisecond)
		t.Reset(next)
		select {
		case <-events:
			delay = 2 * time.Millisecond
		case <-t.C:
		case <-ctx.Done():
			return sema.Grant{}, fmt.Errorf("%w: %w", sema.ErrNotAcquired, context.Cause(ctx))
		}
	}
}

func (e *backendEngine) renew(ctx context.Context, name, id string, ttl time.Duration, who store.Caller) (sema.Grant, error) {
	if err := e.check(name, id, who); err != nil {
		return sema.Grant{}, err
	}
	g, err := e.b.Renew(ctx, name, id, ttl)
	switch {
	case err == nil:
		e.mu.Lock()
		if bd, ok := e.owners[name+"\x00"+id]; ok {
			bd.expires = g.ExpiresAt
			e.owners[name+"\x00"+id] = bd
		}
		e.mu.Unlock()
	case errors.Is(err, sema.ErrLeaseLost):
		e.unbind(name, id)
	}
	return g, err
}

func (e *backendEngine) release(ctx context.Context, name, id string, who store.Caller) error {
	if err := e.check(name, id, who); err != nil {
		return err
	}
	err := e.b.Release(ctx, name, id)
	if err == nil || errors.Is(err, sema.ErrNotHeld) {
		e.unbind(name, id)
	}
	return err
}
