package server

import (
	"context"
	"fmt"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/store"
)

// engine is everything the server needs from what it serves: the
// embedded store (storeEngine) or any sema.Backend (backendEngine). Every
// call on behalf of a client names its caller, to whom a lease is bound.
type engine interface {
	// acquire starts acquiring req for who and calls done exactly once
	// with the grant (once it is durable) or the error that refused it.
	// With wait, a request that must wait is queued. cancel withdraws a
	// queued request: true means done will not be called; false, that
	// done has been or will be (maybe with a grant to give back).
	acquire(req sema.Request, who store.Caller, wait bool, done func(sema.Grant, error)) (cancel func() bool)
	renew(ctx context.Context, name, id string, ttl time.Duration, who store.Caller) (sema.Grant, error)
	release(ctx context.Context, name, id string, who store.Caller) error
	describe(ctx context.Context, name string) (sema.Status, error)
	list(ctx context.Context, prefix string) ([]sema.Status, error)
	forceRelease(ctx context.Context, name, id string) ([]sema.Holder, error)
	guarantees() sema.Guarantees
	// failing reports why the engine cannot grant anything now, if so.
	failing() error
}

// embedded is what the embedded store offers beyond sema.Backend:
// acquires that never block, and calls on behalf of a principal, bound
// durably to its leases.
type embedded interface {
	sema.Inspector
	sema.ForceReleaser
	sema.Declarer
	AcquireAsync(req sema.Request, who store.Caller, wait bool, done func(sema.Grant, error)) *store.Pending
	RenewAs(ctx context.Context, name, id string, ttl time.Duration, who store.Caller) (sema.Grant, error)
	ReleaseAs(ctx context.Context, name, id string, who store.Caller) error
	Err() error
	storeStats
}

// newEngine returns the engine serving b.
func newEngine(b sema.Backend) engine {
	if st, ok := b.(embedded); ok {
		return storeEngine{st}
	}
	return newBackendEngine(b)
}

// storeEngine serves the embedded store, which binds leases to
// principals itself, durably.
type storeEngine struct{ s embedded }

func (e storeEngine) acquire(req sema.Request, who store.Caller, wait bool, done func(sema.Grant, error)) func() bool {
	return e.s.AcquireAsync(req, who, wait, done).Cancel
}

func (e storeEngine) renew(ctx context.Context, name, id string, ttl time.Duration, who store.Caller) (sema.Grant, error) {
	return e.s.RenewAs(ctx, name, id, ttl, who)
}

func (e storeEngine) release(ctx context.Context, name, id string, who store.Caller) error {
	return e.s.ReleaseAs(ctx, name, id, who)
}

func (e storeEngine) describe(ctx context.Context, name string) (sema.Status, error) {
	return e.s.Describe(ctx, name)
}

func (e storeEngine) list(ctx context.Context, prefix string) ([]sema.Status, error) {
	return e.s.List(ctx, prefix)
}

func (e storeEngine) forceRelease(ctx context.Context, name, id string) ([]sema.Holder, error) {
	return e.s.ForceRelease(ctx, name, id)
}

func (e storeEngine) guarantees() sema.Guarantees { return served(e.s.Guarantees(), true) }

func (e storeEngine) failing() error { return e.s.Err() }

// served is what clients of the server are promised, given what the
// engine declares: reachable from many hosts, woken by long-poll; FIFO
// only if the engine queues waiters itself.
func served(g sema.Guarantees, queues bool) sema.Guarantees {
	if !queues {
		g.FIFO = false // the server polls such a backend for its waiters
	}
	notes := "served over HTTP by sema serve; waiters are answered by long-poll"
	if g.Notes != "" {
		notes += "; backend: " + g.Notes
	}
	g.Scope, g.Wakeup, g.Notes = sema.ScopeCluster, "long-poll", notes
	return g
}

// errNoInspect answers describe and list on a backend that cannot.
var errNoInspect = fmt.Errorf("%w: the backend cannot describe its locks", sema.ErrInvalidArgument)
