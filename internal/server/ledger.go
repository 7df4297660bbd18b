package server

import (
	"hash/maphash"
	"sync"
	"time"
)

// ledger remembers, per principal, the leases this server granted or
// renewed until a while after they expire, and those it released until a
// while after the release. It lets the server tell a lease that expired
// (renew: lease_lost, reason expired) from an ID it never handed to this
// caller (renew: not_held), and answer a second release of a lease with
// success, as the Go client's Release is idempotent. It is memory only:
// after a restart, or once an entry is swept, the server answers as for
// an unknown ID.
type ledger struct {
	seed   maphash.Seed
	shards [ledgerShards]ledgerShard
}

const (
	ledgerShards = 32
	// expiredKeep is how long after its expiry a lease is still known.
	expiredKeep = time.Minute
	// releasedKeep is how long a release is remembered, to answer a
	// repeated one with success.
	releasedKeep = 10 * time.Second
)

type ledgerShard struct {
	mu      sync.Mutex
	m       map[string]ledgerEntry
	inserts int
}

type ledgerEntry struct {
	until    time.Time // the entry is forgotten after this
	released bool
	unknown  bool // a release of an ID the server did not know: only refuses a late acquire of it
}

func newLedger() *ledger {
	l := &ledger{seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].m = make(map[string]ledgerEntry)
	}
	return l
}

func (l *ledger) shard(key string) *ledgerShard {
	return &l.shards[maphash.String(l.seed, key)%ledgerShards]
}

func ledgerKey(principal, name, id string) string {
	return principal + "\x00" + name + "\x00" + id
}

// held records that the lease is live until expires (a grant or a renewal).
func (l *ledger) held(principal, name, id string, expires time.Time) {
	k := ledgerKey(principal, name, id)
	l.shard(k).put(k, ledgerEntry{until: expires.Add(expiredKeep)})
}

// released records a release of the lease.
func (l *ledger) released(principal, name, id string) {
	k := ledgerKey(principal, name, id)
	l.shard(k).put(k, ledgerEntry{until: time.Now().Add(releasedKeep), released: true})
}

// unknownReleased records a release of an ID the server knew neither as a
// lease nor as a waiter of this caller: an acquire of it still on its way
// (over HTTP/1.1 a client's give-back can overtake the acquire it gives
// up) is refused for a while.
func (l *ledger) unknownReleased(principal, name, id string) {
	k := ledgerKey(principal, name, id)
	l.shard(k).put(k, ledgerEntry{until: time.Now().Add(releasedKeep), unknown: true})
}

// forget drops the lease: its loss has been reported.
func (l *ledger) forget(principal, name, id string) {
	k := ledgerKey(principal, name, id)
	sh := l.shard(k)
	sh.mu.Lock()
	delete(sh.m, k)
	sh.mu.Unlock()
}

// lookup reports whether the server knows the lease, and whether it was
// released.
func (l *ledger) lookup(principal, name, id string) (known, released bool) {
	e, ok := l.get(principal, name, id)
	if !ok || e.unknown {
		return false, false
	}
	return true, e.released
}

// givenUp reports whether this caller released the ID before the server
// knew it: an acquire of it now is one its client gave up. (An ID released
// after a grant may be acquired again.)
func (l *ledger) givenUp(principal, name, id string) bool {
	e, ok := l.get(principal, name, id)
	return ok && e.unknown
}

func (l *ledger) get(principal, name, id string) (ledgerEntry, bool) {
	k := ledgerKey(principal, name, id)
	sh := l.shard(k)
	sh.mu.Lock()
	e, ok := sh.m[k]
	sh.mu.Unlock()
	if !ok || time.Now().After(e.until) {
		return ledgerEntry{}, false
	}
	return e, true
}

// put stores e under k, sweeping the shard once it has grown by as many
// entries as it holds.
func (sh *ledgerShard) put(k string, e ledgerEntry) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.m[k]; !ok {
		sh.inserts++
	}
	sh.m[k] = e
	if sh.inserts < 256 || sh.inserts < len(sh.m) {
		return
	}
	sh.inserts = 0
	now := time.Now()
	for k, e := range sh.m {
		if now.After(e.until) {
			delete(sh.m, k)
		}
	}
}
