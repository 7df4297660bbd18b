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
// caller (renew: not_held), answer a second release of a lease with
// success, as the Go client's Release is idempotent, and refuse an acquire
// its caller gave up before it arrived (see unknownReleased). It is memory
// only: after a restart, or once an entry is swept, the server answers as
// for an unknown ID.
//
// An entry is 16 bytes under a 64-bit hash of (principal, name, lease ID):
// a server holding a million leases keeps a million entries. Two leases
// whose hashes collide (about one chance in 2^64 per pair) share an entry,
// which can only change which of those answers one of them gets.
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
	m       map[uint64]ledgerEntry
	inserts int
}

// ledgerEntry is what the ledger knows of one lease ID.
type ledgerEntry struct {
	until int64 // Unix ns: the entry is forgotten after this
	state ledgerState
}

type ledgerState uint8

const (
	ledgerHeld     ledgerState = iota // granted or renewed
	ledgerReleased                    // released after a grant
	ledgerUnknown                     // released before the server knew it: only refuses a late acquire of it
)

func newLedger() *ledger {
	l := &ledger{seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].m = make(map[uint64]ledgerEntry)
	}
	return l
}

// key hashes the lease's principal, name and ID, and returns its shard.
func (l *ledger) key(principal, name, id string) (uint64, *ledgerShard) {
	var h maphash.Hash
	h.SetSeed(l.seed)
	h.WriteString(principal)
	h.WriteByte(0)
	h.WriteString(name)
	h.WriteByte(0)
	h.WriteString(id)
	k := h.Sum64()
	return k, &l.shards[k%ledgerShards]
}

func (l *ledger) put(principal, name, id string, until time.Time, st ledgerState) {
	k, sh := l.key(principal, name, id)
	sh.put(k, ledgerEntry{until: until.UnixNano(), state: st})
}

// held records that the lease is live until expires (a grant or a renewal).
func (l *ledger) held(principal, name, id string, expires time.Time) {
	l.put(principal, name, id, expires.Add(expiredKeep), ledgerHeld)
}

// released records a release of the lease.
func (l *ledger) released(principal, name, id string) {
	l.put(principal, name, id, time.Now().Add(releasedKeep), ledgerReleased)
}

// unknownReleased records a release of an ID the server knew neither as a
// lease nor as a waiter of this caller: an acquire of it still on its way
// (over HTTP/1.1 a client's give-back can overtake the acquire it gives
// up) is refused for a while.
func (l *ledger) unknownReleased(principal, name, id string) {
	l.put(principal, name, id, time.Now().Add(releasedKeep), ledgerUnknown)
}

// forget drops the lease: its loss has been reported.
func (l *ledger) forget(principal, name, id string) {
	k, sh := l.key(principal, name, id)
	sh.mu.Lock()
	delete(sh.m, k)
	sh.mu.Unlock()
}

// lookup reports whether the server knows the lease, and whether it was
// released.
func (l *ledger) lookup(principal, name, id string) (known, released bool) {
	e, ok := l.get(principal, name, id)
	if !ok || e.state == ledgerUnknown {
		return false, false
	}
	return true, e.state == ledgerReleased
}

// givenUp reports whether this caller released the ID before the server
// knew it: an acquire of it now is one its client gave up. (An ID released
// after a grant may be acquired again.)
func (l *ledger) givenUp(principal, name, id string) bool {
	e, ok := l.get(principal, name, id)
	return ok && e.state == ledgerUnknown
}

func (l *ledger) get(principal, name, id string) (ledgerEntry, bool) {
	k, sh := l.key(principal, name, id)
	sh.mu.Lock()
	e, ok := sh.m[k]
	sh.mu.Unlock()
	if !ok || time.Now().UnixNano() > e.until {
		return ledgerEntry{}, false
	}
	return e, true
}

// put stores e under k, sweeping the shard once it has grown by as many
// entries as it holds.
func (sh *ledgerShard) put(k uint64, e ledgerEntry) {
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
	now := time.Now().UnixNano()
	for k, e := range sh.m {
		if now > e.until {
			delete(sh.m, k)
		}
	}
}
