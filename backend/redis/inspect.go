package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/forced"
)

// Describe returns the live holders and waiters of name, read in one
// script at one instant of Redis's clock.
func (b *Backend) Describe(ctx context.Context, name string) (sema.Status, error) {
	if b.closed.Load() {
		return sema.Status{}, sema.ErrClosed
	}
	if err := sema.ValidateName(name); err != nil {
		return sema.Status{}, err
	}
	keys := b.ks.keys(name)
	v, err := scripts().describe.Run(ctx, b.rdb, keys[:2]).Result()
	if err != nil {
		return sema.Status{}, wrap("describe", name, err)
	}
	st, err := decodeStatus(name, v)
	if err != nil {
		return sema.Status{}, fmt.Errorf("redis: describe %q: %w", name, err)
	}
	slices.SortFunc(st.Holders, func(a, b sema.Holder) int { return cmp.Compare(a.Token, b.Token) })
	return st, nil
}

// List returns the names starting with prefix that have holders or
// waiters, sorted. It walks the keys with SCAN (never KEYS), on every
// primary of a cluster, and describes each name it finds; a name whose
// keys sema cannot read is left out, with a warning to Config.Logger.
func (b *Backend) List(ctx context.Context, prefix string) ([]sema.Status, error) {
	if b.closed.Load() {
		return nil, sema.ErrClosed
	}
	if len(prefix) > sema.MaxNameLen {
		return nil, fmt.Errorf("%w: prefix longer than %d bytes", sema.ErrInvalidName, sema.MaxNameLen)
	}
	var (
		mu    sync.Mutex
		names []string
	)
	scan := func(ctx context.Context, c *goredis.Client) error {
		it := c.Scan(ctx, 0, b.ks.pattern(prefix), 1000).Iterator()
		for it.Next(ctx) {
			name, err := b.ks.nameOf(it.Val())
			if err != nil || !strings.HasPrefix(name, prefix) {
				continue // not sema's, or not under prefix
			}
			mu.Lock()
			names = append(names, name)
			mu.Unlock()
		}
		return it.Err()
	}
	var err error
	if b.cluster != nil {
		err = b.cluster.ForEachMaster(ctx, scan)
	} else {
		err = scan(ctx, b.single)
	}
	if err != nil {
		return nil, wrap("list", prefix, err)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	var out []sema.Status
	for _, name := range names {
		st, err := b.Describe(ctx, name)
		if errors.Is(err, ErrCorrupt) {
			b.cfg.Logger.Warn("sema: redis: list skips a name whose keys sema cannot read", "name", name, "err", err)
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(st.Holders) > 0 || len(st.Waiters) > 0 {
			out = append(out, st)
		}
	}
	return out, nil
}

// ForceRelease ends the lease id of name, or all of its leases if id is
// empty. A later Renew of such a lease wraps sema.ErrForceReleased. With
// opts.Now the permits go to the waiters at once; by default they stay
// taken until the leases expire by Redis's clock or their holders release
// them.
func (b *Backend) ForceRelease(ctx context.Context, name, id string, opts sema.ForceOptions) ([]sema.Holder, error) {
	if b.closed.Load() {
		return nil, sema.ErrClosed
	}
	if err := sema.ValidateName(name); err != nil {
		return nil, err
	}
	if id != "" {
		if err := sema.ValidateID(id); err != nil {
			return nil, err
		}
	}
	now := "0"
	if opts.Now {
		now = "1"
	}
	v, _, err := b.run(ctx, scripts().force, name, id, b.live, now)
	if err != nil {
		return nil, wrap("force-release", name, err)
	}
	a, err := reply(v)
	var hs []sema.Holder
	if err == nil {
		hs, err = holdersAt(a, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("redis: force-release %q: %w", name, err)
	}
	if len(hs) == 0 {
		return nil, fmt.Errorf("redis: force-release %q: %w", name, sema.ErrNotHeld)
	}
	for i := range hs {
		hs[i].ForceReleased = true
	}
	b.tellForced(ctx, name, hs, opts.By)
	return hs, nil
}

// NotifyForced makes the backend call f for each lease force-released
// under its prefix, by any client, so that a holder of this backend learns
// at once rather than at its next renewal (sema.ForceNotifier); a client
// ignores the leases it does not hold. The subscription that brings the
// wake-ups of waits also brings the channel force-releases are published
// on; a backend that holds a lease without having waited subscribes in the
// background (see holding).
func (b *Backend) NotifyForced(f func(sema.ForceNotice)) (stop func()) {
	stop = b.notices.Add(f)
	b.noticing.Store(true)
	return stop
}

// holding subscribes, in the background, once this backend holds a lease
// and clients want to hear of force-releases; a failed attempt is made
// again at the next grant.
func (b *Backend) holding() {
	if b.noticing.Load() && !b.wake.ready.Load() && !b.closed.Load() {
		b.wake.attempt(b)
	}
}

// tellForced publishes the leases hs of name that by force-released, a
// forced.Message each, for their holders. A message lost is learned at
// the holder's next renewal.
func (b *Backend) tellForced(ctx context.Context, name string, hs []sema.Holder, by string) {
	_, err := b.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, h := range hs {
			if h.ID != "" {
				p.Publish(ctx, b.forced, forced.Encode(name, h.ID, by))
			}
		}
		return nil
	})
	if err != nil {
		b.cfg.Logger.Debug("sema: redis: publishing a force-release", "name", name, "err", err)
	}
}
