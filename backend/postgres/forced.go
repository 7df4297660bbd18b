package postgres

import (
	"context"
	"strings"
)

// NotifyForced makes the backend call f with the name and lease ID of each
// lease force-released in its tables, by any client, so that a holder of
// this backend learns at once rather than at its next renewal
// (sema.ForceNotifier); a client ignores the leases it does not hold. Once
// the backend holds a lease (or waits), its listen connection LISTENs on
// the channel force-releases are announced on.
func (b *Backend) NotifyForced(f func(name, id string)) (stop func()) {
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

// tellForced announces the force-released leases of name, "<lease ID>
// <name>" each, on the channel of force-releases. One lost is learned at
// the holder's next renewal.
func (b *Backend) tellForced(ctx context.Context, name string, ids []string) {
	if len(ids) == 0 {
		return
	}
	_, err := b.pool.Exec(ctx, "SELECT pg_notify($1, id || ' ' || $2) FROM unnest($3::text[]) AS id", b.forced, name, ids)
	if err != nil {
		b.log.Debug("postgres: announcing a force-release", "name", name, "err", err)
	}
}

// heardForced tells the registered clients of a force-release announced.
func (b *Backend) heardForced(payload string) {
	if id, name, ok := strings.Cut(payload, " "); ok {
		b.notices.Tell(name, []string{id})
	}
}
