package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/sema-dev/sema"
)

// acquire runs the acquire step: queue says whether the request waits in
// line if it cannot be granted at once.
func (b *Backend) acquire(ctx context.Context, req *sema.Request, queue bool) (st row, rest []row, err error) {
	pid := int32(0)
	if req.PID <= math.MaxInt32 {
		pid = int32(req.PID)
	}
	rs, err := b.acquireFree(ctx, req, pid, queue)
	if err != nil {
		return row{}, nil, err
	}
	if len(rs) == 0 { // not the common case
		rs, err = b.step(ctx, "acquire", req.Name, b.stmt.acquire, req.Name, req.ID, req.Owner, req.Host, pid,
			req.Limit, req.Weight, req.TTL.Microseconds(), queue, b.lis.channel, b.cfg.WaiterTTL.Microseconds())
		if err != nil {
			return row{}, nil, err
		}
	}
	st, rest, err = b.settle(rs, "acquire", req.Name)
	if err != nil {
		return row{}, nil, err
	}
	switch st.kind {
	case kindGranted:
		if st.id != req.ID {
			return row{}, nil, b.wrap("acquire", req.Name, fmt.Errorf("%w: granted lease %q", errAnswer, st.id))
		}
	case kindMismatch:
		return row{}, nil, fmt.Errorf("postgres: acquire %q: %w: it has limit %d, asked %d",
			req.Name, sema.ErrLimitMismatch, st.lim, req.Limit)
	case kindRevoked:
		return row{}, nil, fmt.Errorf("postgres: acquire %q: %w: lease id %q was force-released",
			req.Name, sema.ErrForceReleased, req.ID)
	}
	return st, rest, nil
}

// settle hands the grants of a step's answer to this process's waiters and
// returns its status row and the rows after it, checked.
func (b *Backend) settle(rs []row, op, name string) (row, []row, error) {
	grants, st, rest, err := status(rs)
	if err == nil && st.kind == kindGranted {
		err = st.checkLease()
	}
	if err != nil {
		return row{}, nil, b.wrap(op, name, err)
	}
	b.lis.deliver(grants)
	return st, rest, nil
}

// TryAcquire grants the request if its permits are free and nobody waits.
func (b *Backend) TryAcquire(ctx context.Context, req sema.Request) (sema.Grant, error) {
	if err := req.Validate(); err != nil {
		return sema.Grant{}, err
	}
	if b.closed.Load() {
		return sema.Grant{}, sema.ErrClosed
	}
	st, rest, err := b.acquire(ctx, &req, false)
	if err != nil {
		return sema.Grant{}, err
	}
	switch st.kind {
	case kindGranted:
		b.holding()
		return st.grant(), nil
	case kindHeld:
		return sema.Grant{}, heldError(st, rest)
	}
	return sema.Grant{}, b.wrap("acquire", req.Name, fmt.Errorf("%w: %q", errAnswer, st.kind))
}

// Renew extends the live lease id of name by ttl from now, by the
// database's clock. It never re-creates a lease.
func (b *Backend) Renew(ctx context.Context, name, id string, ttl time.Duration) (sema.Grant, error) {
	if err := sema.ValidateTTL(ttl); err != nil {
		return sema.Grant{}, err
	}
	if err := checkNameID(name, id); err != nil {
		return sema.Grant{}, fmt.Errorf("postgres: renew: %w", err)
	}
	if b.closed.Load() {
		return sema.Grant{}, sema.ErrClosed
	}
	rs, err := b.call(ctx, "renew", name, b.stmt.renew, name, id, ttl.Microseconds())
	if err != nil {
		return sema.Grant{}, err
	}
	st, _, err := b.settle(rs, "renew", name)
	if err != nil {
		return sema.Grant{}, err
	}
	switch st.kind {
	case kindGranted:
		return st.grant(), nil
	case kindRevoked:
		return sema.Grant{}, fmt.Errorf("postgres: renew %q: %w", name, sema.ErrForceReleased)
	case kindLost:
		return sema.Grant{}, fmt.Errorf("postgres: renew %q: %w", name, sema.ErrLeaseLost)
	}
	return sema.Grant{}, b.wrap("renew", name, fmt.Errorf("%w: %q", errAnswer, st.kind))
}

// checkNameID checks the name and lease ID of a renew or release, so that
// garbage is an error before it reaches the database. Errors wrap
// sema.ErrLeaseLost-free sentinels: ErrInvalidName or ErrInvalidArgument.
func checkNameID(name, id string) error {
	if err := sema.ValidateName(name); err != nil {
		return err
	}
	return sema.ValidateID(id)
}

// Release frees the lease id of name and hands its permits to the waiters
// in the same transaction. An unknown or expired lease is sema.ErrNotHeld;
// a force-released one whose permits were still taken frees them and
// reports sema.ErrForceReleased.
func (b *Backend) Release(ctx context.Context, name, id string) error {
	if err := checkNameID(name, id); err != nil {
		return fmt.Errorf("postgres: release: %w (%w)", sema.ErrNotHeld, err)
	}
	if b.closed.Load() {
		return sema.ErrClosed
	}
	rs, err := b.releaseFree(ctx, name, id)
	if err != nil {
		return err
	}
	if len(rs) == 0 { // not the common case
		if rs, err = b.call(ctx, "release", name, b.stmt.release, name, id, b.lis.channel); err != nil {
			return err
		}
	}
	st, _, err := b.settle(rs, "release", name)
	if err != nil {
		return err
	}
	switch st.kind {
	case kindReleased:
		return nil
	case kindRevoked:
		return fmt.Errorf("postgres: release %q: %w", name, sema.ErrForceReleased)
	case kindNotHeld:
		return fmt.Errorf("postgres: release %q: %w", name, sema.ErrNotHeld)
	}
	return b.wrap("release", name, fmt.Errorf("%w: %q", errAnswer, st.kind))
}

// ForceRelease ends the lease id of name, or every lease of name if id is
// "". The revoked leases stay in the table until their expiry, so that
// their holders' renewals fail with sema.ErrForceReleased; unless opts.Now
// (which hands the permits on at once) their permits stay taken until
// then, or until their holders release them.
func (b *Backend) ForceRelease(ctx context.Context, name, id string, opts sema.ForceOptions) ([]sema.Holder, error) {
	if err := sema.ValidateName(name); err != nil {
		return nil, err
	}
	if id != "" {
		if err := sema.ValidateID(id); err != nil {
			return nil, err
		}
	}
	if b.closed.Load() {
		return nil, sema.ErrClosed
	}
	rs, err := b.call(ctx, "force-release", name, b.stmt.forceRelease, name, id, b.lis.channel, opts.Now)
	if err != nil {
		return nil, err
	}
	var hs []sema.Holder
	var granted []row
	var ids []string
	for i := range rs {
		r := &rs[i]
		if err := r.checkLease(); err != nil {
			return nil, b.wrap("force-release", name, err)
		}
		switch r.kind {
		case kindHolder:
			h := r.holder()
			h.ForceReleased = true
			hs = append(hs, h)
			if h.ID != "" {
				ids = append(ids, h.ID)
			}
		case kindGrant:
			granted = append(granted, *r)
		}
	}
	b.lis.deliver(granted)
	if len(hs) == 0 {
		return nil, fmt.Errorf("postgres: force-release %q: %w", name, sema.ErrNotHeld)
	}
	b.tellForced(ctx, name, ids, opts.By)
	return hs, nil
}

// Describe returns the live holders and waiters of name.
func (b *Backend) Describe(ctx context.Context, name string) (sema.Status, error) {
	if err := sema.ValidateName(name); err != nil {
		return sema.Status{}, err
	}
	sts, err := b.inspect(ctx, name, false)
	if err != nil {
		return sema.Status{}, err
	}
	if len(sts) == 0 {
		return sema.Status{Name: name, Holders: []sema.Holder{}, Waiters: []sema.WaiterInfo{}}, nil
	}
	return sts[0], nil
}

// List returns the names starting with prefix that have holders or
// waiters, sorted by name.
func (b *Backend) List(ctx context.Context, prefix string) ([]sema.Status, error) {
	if len(prefix) > sema.MaxNameLen {
		return nil, fmt.Errorf("postgres: list: %w: prefix longer than %d bytes", sema.ErrInvalidName, sema.MaxNameLen)
	}
	return b.inspect(ctx, prefix, true)
}

func (b *Backend) inspect(ctx context.Context, name string, prefix bool) ([]sema.Status, error) {
	if b.closed.Load() {
		return nil, sema.ErrClosed
	}
	op := "describe"
	if prefix {
		op = "list"
	}
	rs, err := b.call(ctx, op, name, b.stmt.inspect, name, prefix)
	if err != nil {
		return nil, err
	}
	// The rows come by name, holders by token, then waiters in order.
	var out []sema.Status
	for i := range rs {
		r := &rs[i]
		if len(out) == 0 || out[len(out)-1].Name != r.name {
			out = append(out, sema.Status{Name: r.name, Limit: r.lim, Holders: []sema.Holder{}, Waiters: []sema.WaiterInfo{}})
		}
		st := &out[len(out)-1]
		switch r.kind {
		case kindHolder, kindForced:
			if err := r.checkLease(); err != nil {
				return nil, b.wrap(op, name, err)
			}
			h := r.holder()
			h.ForceReleased = r.kind == kindForced
			st.Holders = append(st.Holders, h)
			st.Used += r.weight
		case kindWaiter:
			st.Waiters = append(st.Waiters, sema.WaiterInfo{
				Owner: r.owner, Weight: r.weight, Since: usTime(r.t1), Host: r.host, PID: int(r.pid),
			})
		default:
			return nil, b.wrap(op, name, fmt.Errorf("%w: %q", errAnswer, r.kind))
		}
	}
	if out == nil {
		out = []sema.Status{}
	}
	return out, nil
}
