package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sema-dev/sema"
)

// The common cases of acquire and release, as prepared statements of their
// own (sql/acquire_free.sql, sql/release_free.sql): an acquire of permits
// that are free with nobody queued, and the release of its lease while
// nobody waits. Each answers nothing, and changes nothing, where it does
// not apply, and the function is called next: two round trips, and more of
// the database's time, then. So the backend sends them only where they
// most likely apply. A release sends its statement only for a lease
// granted by acquire's: a lease granted after a wait most likely has
// waiters behind it, whose hand-off should not wait for a round trip more.
// An acquire skips its statement for a name that had a queue at this
// backend's last look, within busyFor: a queue that lasts is served by
// the functions alone.

// hints are what the backend saw of the leases it granted by acquire's
// statement (and has not released yet) and of the names with a queue.
type hints struct {
	mu   sync.Mutex
	free map[leaseRef]struct{}
	busy map[string]time.Time // when an acquire last found a queue or the permits taken
}

type leaseRef struct{ name, id string }

// maxHints bounds each map of hints: a lease its holder never releases
// stays in free, so a full map is emptied, and the leases and names it
// held take the functions at once, or their statements again.
const maxHints = 4096

// busyFor is how long a name that had a queue is left to the functions.
const busyFor = time.Second

// granted notes a lease granted by acquire's statement.
func (h *hints) granted(name, id string) {
	h.mu.Lock()
	if h.free == nil || len(h.free) >= maxHints {
		h.free = make(map[leaseRef]struct{})
	}
	h.free[leaseRef{name, id}] = struct{}{}
	h.mu.Unlock()
}

// ended forgets the lease and reports whether acquire's statement granted it.
func (h *hints) ended(name, id string) bool {
	h.mu.Lock()
	_, ok := h.free[leaseRef{name, id}]
	delete(h.free, leaseRef{name, id})
	h.mu.Unlock()
	return ok
}

// queued notes that an acquire on name found a queue, or its permits taken.
func (h *hints) queued(name string) {
	h.mu.Lock()
	if h.busy == nil || len(h.busy) >= maxHints {
		h.busy = make(map[string]time.Time)
	}
	h.busy[name] = time.Now()
	h.mu.Unlock()
}

// isBusy reports whether an acquire on name found a queue within busyFor.
func (h *hints) isBusy(name string) bool {
	h.mu.Lock()
	t, ok := h.busy[name]
	if ok && time.Since(t) >= busyFor {
		delete(h.busy, name)
		ok = false
	}
	h.mu.Unlock()
	return ok
}

// acquireFree runs acquire's statement: its grant, or no rows.
func (b *Backend) acquireFree(ctx context.Context, req *sema.Request, pid int32) ([]row, error) {
	if b.stmt.acquireFree == "" || b.hints.isBusy(req.Name) {
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
		b.hints.granted(req.Name, req.ID)
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
	if b.stmt.releaseFree == "" || !b.hints.ended(name, id) {
		return nil, nil
	}
	return b.call(ctx, "release", name, b.stmt.releaseFree, name, id)
}
