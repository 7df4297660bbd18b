package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sema-dev/sema"
)

// row is one row of a function's answer (the {{row}} type of schema.sql).
type row struct {
	kind, name, id, owner, host string
	pid                         int32
	weight, token, lim, n       int64
	t1, t2, t3                  int64 // µs since the Unix epoch, 0 if none
}

// Row kinds.
const (
	kindGrant    = "grant"    // a queued request granted by this step
	kindGranted  = "granted"  // the asked lease
	kindQueued   = "queued"   // the asked request waits; n: µs until the next look, -1 none
	kindHeld     = "held"     // not granted; n: waiters; followed by holder rows
	kindHolder   = "holder"   // a live lease
	kindWaiter   = "waiter"   // a queued request (token: its ticket)
	kindMismatch = "mismatch" // the name has another limit (lim)
	kindRevoked  = "revoked"  // the lease was force-released
	kindLost     = "lost"     // no such live lease
	kindGone     = "gone"     // the request is neither queued nor granted
	kindReleased = "released"
	kindNotHeld  = "not_held"
)

// call runs a step (one statement) and returns its rows. A deadlock or
// serialization failure — which the lock order should prevent — is retried
// a few times and counted; so is a statement that was provably never sent
// (a pooled connection found broken). Calls without a deadline get one.
func (b *Backend) call(ctx context.Context, op, name, stmt string, args ...any) ([]row, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, callTimeout)
		defer cancel()
	}
	for attempt := 0; ; attempt++ {
		rs, err := b.query(ctx, stmt, args...)
		if err == nil {
			return rs, nil
		}
		if attempt < maxConflicts && ctx.Err() == nil && !b.closed.Load() {
			if conflict(err) {
				b.conflicts.Add(1)
				if sleepCtx(ctx, backoff(attempt)) == nil {
					continue
				}
			} else if safeToRetry(err) {
				continue
			}
		}
		return nil, b.wrap(op, name, err)
	}
}

// step runs a step that may grant or queue. It is not abandoned when ctx
// ends, only after callTimeout: a statement abandoned in flight may still
// commit after the caller has tried to take its request back, and then a
// grant would leak until its TTL. The caller checks ctx afterwards.
func (b *Backend) step(ctx context.Context, op, name, stmt string, args ...any) ([]row, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer cancel()
	return b.call(ctx, op, name, stmt, args...)
}

func (b *Backend) query(ctx context.Context, stmt string, args ...any) ([]row, error) {
	rows, err := b.pool.Query(ctx, stmt, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]row, 0, 2)
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.kind, &r.name, &r.id, &r.owner, &r.host, &r.pid,
			&r.weight, &r.token, &r.lim, &r.n, &r.t1, &r.t2, &r.t3); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// errAnswer is an answer no sema function gives: the functions were
// replaced or the tables altered.
var errAnswer = errors.New("unexpected answer from the sema functions")

// status splits a step's answer: grants made in passing (for this
// process's waiters), the status row, and the rows after it (holders).
func status(rs []row) (grants []row, st row, rest []row, err error) {
	for i := range rs {
		if rs[i].kind == kindGrant {
			if err := rs[i].checkLease(); err != nil {
				return nil, row{}, nil, err
			}
			grants = append(grants, rs[i])
			continue
		}
		return grants, rs[i], rs[i+1:], nil
	}
	return grants, row{}, nil, nil
}

// checkLease validates a row describing a lease.
func (r *row) checkLease() error {
	if r.token < 1 || r.weight < 1 || r.id == "" || r.t1 <= 0 || r.t3 <= r.t1 {
		return fmt.Errorf("%w: %s row %+v", errAnswer, r.kind, *r)
	}
	return nil
}

func usTime(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us)
}

// grant is the sema.Grant of a lease row.
func (r *row) grant() sema.Grant {
	return sema.Grant{
		Name: r.name, ID: r.id, Token: uint64(r.token), Owner: r.owner, Weight: r.weight, Limit: r.lim,
		AcquiredAt: usTime(r.t1), ExpiresAt: usTime(r.t3),
	}
}

// holder is the sema.Holder of a lease row.
func (r *row) holder() sema.Holder {
	return sema.Holder{
		ID: r.id, Owner: r.owner, Token: uint64(r.token), Weight: r.weight,
		AcquiredAt: usTime(r.t1), RenewedAt: usTime(r.t2), ExpiresAt: usTime(r.t3),
		Host: r.host, PID: int(r.pid),
	}
}

// heldError is the *sema.HeldError of a "held" answer.
func heldError(st row, rest []row) error {
	he := &sema.HeldError{Name: st.name, Limit: st.lim, Waiters: int(st.n)}
	for i := range rest {
		if rest[i].kind == kindHolder {
			he.Holders = append(he.Holders, rest[i].holder())
		}
	}
	return he
}
