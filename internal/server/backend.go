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

// backendEngine serves any sema.Backend (sema serve --backend). It binds
// leases to principals in memory: after a restart of the server, a lease
// it did not grant can be renewed or released by any client that knows
// its ID.
type backendEngine struct {
	b       sema.Backend
	blocker sema.Blocker
	notify  sema.Notifier

	mu      sync.Mutex
	owners  map[string]*binding // name\x00id → who acquired it
	inserts int
}

// binding ties a lease ID to the principal that acquires or holds it. It
// is made before the backend is asked, so that two principals racing for
// one ID cannot both win (acquiring counts the calls in flight).
type binding struct {
	principal string
	acquiring int
	granted   bool
	expires   time.Time
}

func newBackendEngine(b sema.Backend) *backendEngine {
	e := &backendEngine{b: b, owners: make(map[string]*binding)}
	e.blocker, _ = b.(sema.Blocker)
	e.notify, _ = b.(sema.Notifier)
	return e
}

// mine reports whether who may act on the lease id of name: an admin, its
// own principal, or anyone for a lease the server has not bound.
func (e *backendEngine) mine(name, id string, who store.Caller) bool {
	if who.Admin {
		return true
	}
	e.mu.Lock()
	bd := e.owners[name+"\x00"+id]
	e.mu.Unlock()
	return bd == nil || bd.principal == who.Principal
}

// bindStart binds the lease ID of req to who before the backend is asked,
// unless another principal holds or is acquiring it.
func (e *backendEngine) bindStart(req *sema.Request, who store.Caller) error {
	k := req.Name + "\x00" + req.ID
	e.mu.Lock()
	defer e.mu.Unlock()
	bd := e.owners[k]
	switch {
	case bd == nil:
		bd = &binding{principal: who.Principal}
		e.owners[k] = bd
		e.sweep()
	case bd.principal != who.Principal && !who.Admin:
		return fmt.Errorf("server: acquire %q: %w", req.Name, store.ErrForbidden)
	}
	bd.acquiring++
	return nil
}

// bindEnd records the outcome of an acquire started with bindStart.
func (e *backendEngine) bindEnd(req *sema.Request, g sema.Grant, err error) {
	k := req.Name + "\x00" + req.ID
	e.mu.Lock()
	defer e.mu.Unlock()
	bd := e.owners[k]
	if bd == nil {
		return
	}
	bd.acquiring--
	if err == nil {
		bd.granted, bd.expires = true, g.ExpiresAt
	} else if bd.acquiring == 0 && !bd.granted {
		delete(e.owners, k)
	}
}

// sweep forgets expired bindings, once the map has grown by as many
// entries as it holds. Callers hold e.mu.
func (e *backendEngine) sweep() {
	if e.inserts++; e.inserts < 1024 || e.inserts < len(e.owners) {
		return
	}
	e.inserts = 0
	now := time.Now()
	for k, bd := range e.owners {
		if bd.granted && bd.acquiring == 0 && now.After(bd.expires) {
			delete(e.owners, k)
		}
	}
}

func (e *backendEngine) unbind(name, id string) {
	e.mu.Lock()
	if bd := e.owners[name+"\x00"+id]; bd != nil && bd.acquiring == 0 {
		delete(e.owners, name+"\x00"+id)
	}
	e.mu.Unlock()
}

// acquire asks the backend on a goroutine of its own, which cancel ends.
func (e *backendEngine) acquire(req sema.Request, who store.Caller, wait bool, done func(sema.Grant, error)) func() bool {
	if err := req.Validate(); err != nil {
		done(sema.Grant{}, err)
		return func() bool { return false }
	}
	if err := e.bindStart(&req, who); err != nil {
		done(sema.Grant{}, err)
		return func() bool { return false }
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer cancel()
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
		e.bindEnd(&req, g, err)
		done(g, err)
	}()
	return func() bool { cancel(); return false }
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

// renew extends the lease; another principal's lease is answered as an
// unknown one.
func (e *backendEngine) renew(ctx context.Context, name, id string, ttl time.Duration, who store.Caller) (sema.Grant, error) {
	if !e.mine(name, id, who) {
		return sema.Grant{}, fmt.Errorf("server: renew %q: %w", name, sema.ErrExpired)
	}
	g, err := e.b.Renew(ctx, name, id, ttl)
	switch {
	case err == nil:
		e.mu.Lock()
		if bd := e.owners[name+"\x00"+id]; bd != nil {
			bd.expires = g.ExpiresAt
		}
		e.mu.Unlock()
	case errors.Is(err, sema.ErrLeaseLost):
		e.unbind(name, id)
	}
	return g, err
}

// release frees the lease; another principal's lease is answered as an
// unknown one.
func (e *backendEngine) release(ctx context.Context, name, id string, who store.Caller) error {
	if !e.mine(name, id, who) {
		return fmt.Errorf("server: release %q: %w", name, sema.ErrNotHeld)
	}
	err := e.b.Release(ctx, name, id)
	if err == nil || errors.Is(err, sema.ErrNotHeld) {
		e.unbind(name, id)
	}
	return err
}

func (e *backendEngine) describe(ctx context.Context, name string) (sema.Status, error) {
	in, ok := e.b.(sema.Inspector)
	if !ok {
		return sema.Status{}, errNoInspect
	}
	return in.Describe(ctx, name)
}

func (e *backendEngine) list(ctx context.Context, prefix string) ([]sema.Status, error) {
	in, ok := e.b.(sema.Inspector)
	if !ok {
		return nil, errNoInspect
	}
	return in.List(ctx, prefix)
}

func (e *backendEngine) forceRelease(ctx context.Context, name, id string) ([]sema.Holder, error) {
	fr, ok := e.b.(sema.ForceReleaser)
	if !ok {
		return nil, fmt.Errorf("%w: the backend cannot force-release", sema.ErrInvalidArgument)
	}
	return fr.ForceRelease(ctx, name, id)
}

func (e *backendEngine) guarantees() sema.Guarantees {
	var g sema.Guarantees
	if d, ok := e.b.(sema.Declarer); ok {
		g = d.Guarantees()
	}
	return served(g, e.blocker != nil)
}

func (e *backendEngine) failing() error { return nil }
