package remote

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/wire"
)

// Describe returns the holders and waiters of name (GET /v1/locks/{name}).
// Holder IDs are only shown to admin tokens.
func (b *Backend) Describe(ctx context.Context, name string) (sema.Status, error) {
	if err := sema.ValidateName(name); err != nil {
		return sema.Status{}, err
	}
	if b.closed.Load() {
		return sema.Status{}, sema.ErrClosed
	}
	u := *b.base
	u.Path = b.base.Path + wire.PathLock + name
	u.RawPath = b.base.EscapedPath() + wire.PathLock + url.PathEscape(name)
	var st sema.Status
	if err := b.callJSON(ctx, "describe", name, http.MethodGet, &u, nil, &st); err != nil {
		return sema.Status{}, err
	}
	if st.Name == "" {
		st.Name = name
	}
	return st, nil
}

// List returns the names starting with prefix that have holders or waiters
// (GET /v1/locks?prefix=P, an admin call).
func (b *Backend) List(ctx context.Context, prefix string) ([]sema.Status, error) {
	if b.closed.Load() {
		return nil, sema.ErrClosed
	}
	u := *b.uList
	u.RawQuery = "prefix=" + url.QueryEscape(prefix)
	var resp wire.ListResponse
	if err := b.callJSON(ctx, "list", prefix, http.MethodGet, &u, nil, &resp); err != nil {
		return nil, err
	}
	return resp.Locks, nil
}

// ForceRelease ends the lease id of name, or every lease of name if id is
// empty (POST /v1/force-release, an admin call).
func (b *Backend) ForceRelease(ctx context.Context, name, id string, opts sema.ForceOptions) ([]sema.Holder, error) {
	if err := sema.ValidateName(name); err != nil {
		return nil, err
	}
	if b.closed.Load() {
		return nil, sema.ErrClosed
	}
	var resp wire.ForceReleaseResponse
	in := wire.ForceReleaseRequest{Name: name, ID: id, Now: opts.Now, By: opts.By}
	if err := b.callJSON(ctx, "force-release", name, http.MethodPost, b.uForce, in.Append(nil), &resp); err != nil {
		return nil, err
	}
	if len(resp.Released) == 0 {
		return nil, fmt.Errorf("remote: force-release %q: %w", name, sema.ErrNotHeld)
	}
	return resp.Released, nil
}

// Guarantees returns what the server's store declares (GET /v1/guarantees,
// fetched once), with Scope cluster and Wakeup "long-poll": those are the
// client's view. If the server cannot be reached it returns a conservative
// declaration and asks again next time.
func (b *Backend) Guarantees() sema.Guarantees {
	b.gMu.Lock()
	defer b.gMu.Unlock()
	if b.guarantees != nil {
		return *b.guarantees
	}
	g, err := b.fetchGuarantees()
	if err != nil {
		return sema.Guarantees{
			Scope: sema.ScopeCluster, Wakeup: "long-poll",
			Notes: "the server's guarantees are unknown: it could not be reached",
		}
	}
	b.guarantees = &g
	return g
}

func (b *Backend) fetchGuarantees() (sema.Guarantees, error) {
	if b.closed.Load() {
		return sema.Guarantees{}, sema.ErrClosed
	}
	var g sema.Guarantees
	if err := b.callJSON(context.Background(), "guarantees", "", http.MethodGet, b.uGuarantees, nil, &g); err != nil {
		return sema.Guarantees{}, err
	}
	// The client's view, whatever the server says: reachable from many
	// hosts, woken by the long poll.
	g.Scope, g.Wakeup = sema.ScopeCluster, "long-poll"
	return g, nil
}
