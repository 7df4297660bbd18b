package postgres

import (
	"context"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/forced"
)

// NotifyForced makes the backend call f for each lease force-released in
// its tables, by any client, so that a holder of
// this backend learns at once rather than at its next renewal
// (sema.ForceNotifier); a client ignores the leases it does not hold. Once
// the backend holds a lease (or waits), its listen connection LISTENs on
// the channel force-releases are announced on.
func (b *Backend) NotifyForced(f func(sema.ForceNotice)) (stop func()) {
	stop = b.notices.Add(f)
	b.noticing.Store(true)
	return stop
}

// holding starts the listen connection, if clients want to hear of
// force-releases, when this backend is granted a lease without waiting
// (a waiting Acquire starts it anyway).
func (b *Backend) holding() {
	if b.noticing.Load() && !b.lisUp.Swap(true) {
		b.lis.start()
	}
}

// tellForced announces the leases ids of name that by force-released, a
// forced.Message each, on the channel of force-releases. One lost is
// learned at the holder's next renewal.
func (b *Backend) tellForced(ctx context.Context, name string, ids []string, by string) {
	if len(ids) == 0 {
		return
	}
	msgs := make([]string, len(ids))
	for i, id := range ids {
		msgs[i] = forced.Encode(name, id, by)
	}
	_, err := b.pool.Exec(ctx, "SELECT pg_notify($1, m) FROM unnest($2::text[]) AS m", b.forced, msgs)
	if err != nil {
		b.log.Debug("postgres: announcing a force-release", "name", name, "err", err)
	}
}
