package postgres

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sema-dev/sema"
)

// The common cases of acquire and release, as prepared statements of their
// own (sql/acquire_free.sql, sql/release_free.sql): an acquire of permits
// that are free with nobody queued, and the release of its lease while
// nobody waits. Each answers nothing, and changes nothing, where it does
// not apply, and the function is called next: two round trips, and more of
// the database's time, then. So the backend sends them only where they
// most likely apply. An acquire skips its statement while another Acquire
// of this backend waits for the name: it would queue behind that one. A
// release sends its statement only for a lease granted by acquire's: a
// lease granted after a wait most likely has waiters behind it, whose
// hand-off should not wait for a round trip more.

// freeGrants are the leases this backend granted by acquire's statement
// and has not released yet.
type freeGrants struct {
	mu sync.Mutex
	m  map[leaseRef]struct{}
}

type leaseRef struct{ name, id string }

// maxFreeGrants bounds freeGrants: a lease its holder never releases stays
// in it, so when it is full it is emptied, and the releases of the leases
// it held call the function at once.
const maxFreeGrants = 4096

func (f *freeGrants) add(name, id string) {
	f.mu.Lock()
	if f.m == nil || len(f.m) >= maxFreeGrants {
		f.m = make(map[leaseRef]struct{})
	}
	f.m[leaseRef{name, id}] = struct{}{}
	f.mu.Unlock()
}

// take removes the lease and reports whether it was there.
func (f *freeGrants) take(name, id string) bool {
	f.mu.Lock()
	_, ok := f.m[leaseRef{name, id}]
	delete(f.m, leaseRef{name, id})
	f.mu.Unlock()
	return ok
}

// acquireFree runs acquire's statement: its grant, or no rows. queue says
// that the request is a waiting Acquire's, which the listener counts among
// the name's waiters.
func (b *Backend) acquireFree(ctx context.Context, req *sema.Request, pid int32, queue bool) ([]row, error) {
	self := 0
	if queue {
		self = 1
	}
	if b.stmt.acquireFree == "" || b.lis.waiting(req.Name) > self {
		return nil, nil
	}
	rs, err := b.step(ctx, "acquire", req.Name, b.stmt.acquireFree, req.Name, req.ID, req.Owner, req.Host, pid,
		req.Limit, req.Weight, req.TTL.Microseconds())
	switch {
	case err != nil && b.retried(err):
		return nil, nil
	case err != nil:
		return nil, err
	case len(rs) > 0:
		b.free.add(req.Name, req.ID)
	}
	return rs, nil
}

// retried reports whether acquire's statement failed because the
// request's lease exists: a retry, which the function answers.
func (b *Backend) retried(err error) bool {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pe.Code == "23505" /* unique_violation */ && pe.TableName == b.cfg.TablePrefix+"leases"
}

// releaseFree runs release's statement for a lease granted by acquire's:
// its answer, or no rows.
func (b *Backend) releaseFree(ctx context.Context, name, id string) ([]row, error) {
	if b.stmt.releaseFree == "" || !b.free.take(name, id) {
		return nil, nil
	}
	return b.call(ctx, "release", name, b.stmt.releaseFree, name, id)
}
