package sema

import (
	"crypto/rand"
	"encoding/base32"
	"sync"
	"time"
)

// idBuf amortises crypto/rand over many lease IDs.
type idBuf struct {
	b [512]byte
	n int // unused bytes left at the front of b
}

var (
	idPool = sync.Pool{New: func() any { return new(idBuf) }}
	idEnc  = base32.StdEncoding.WithPadding(base32.NoPadding)
)

// newID returns a random 128-bit lease ID as 26 characters of [A-Z2-7].
func newID() string {
	p := idPool.Get().(*idBuf)
	if p.n < 16 {
		rand.Read(p.b[:]) // never fails (crypto/rand, Go ≥ 1.24)
		p.n = len(p.b)
	}
	var out [26]byte
	idEnc.Encode(out[:], p.b[p.n-16:p.n])
	clear(p.b[p.n-16 : p.n])
	p.n -= 16
	idPool.Put(p)
	return string(out[:])
}

// leaseTimer is a reusable timer whose callback ticks the lease it is lent
// to. Creating a runtime timer costs more than resetting one, and a lease is
// often released microseconds after it was granted.
type leaseTimer struct {
	t  *time.Timer
	l  *Lease // set before Reset, cleared after a successful Stop
	mu sync.Mutex
}

func (lt *leaseTimer) fire() {
	lt.mu.Lock()
	l := lt.l
	lt.mu.Unlock()
	if l != nil {
		l.tick()
	}
}

// getTimer lends a timer from the client's pool (per client, so that a
// client inside a testing/synctest bubble keeps its timers there).
func getTimer(l *Lease, d time.Duration) *leaseTimer {
	lt, _ := l.c.timers.Get().(*leaseTimer)
	if lt == nil {
		lt = &leaseTimer{l: l}
		lt.t = time.AfterFunc(d, lt.fire)
		return lt
	}
	lt.mu.Lock()
	lt.l = l
	lt.mu.Unlock()
	lt.t.Reset(d)
	return lt
}

// stop stops the timer and, if its callback can no longer run, returns it
// to the pool.
func (lt *leaseTimer) stop() {
	if lt.t.Stop() {
		lt.mu.Lock()
		l := lt.l
		lt.l = nil
		lt.mu.Unlock()
		if l != nil {
			l.c.timers.Put(lt)
		}
	}
}
