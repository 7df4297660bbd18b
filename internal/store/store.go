package store

import (
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/forced"
)

// Store is the embedded durable store. It is safe for concurrent use.
type Store struct {
	cfg     Config
	log     *slog.Logger
	notices forced.Notices // told of force-releases (see NotifyForced)
	lock    *os.File       // holds the data directory's lock
	base    time.Time

	mu           sync.Mutex
	names        map[string]*entry
	heap         expiryHeap
	timer        *time.Timer
	timerAt      int64
	token        uint64
	revoked      map[string]int64 // name\x00id of force-released leases → forget after (mono)
	principals   map[string]string
	queued       map[string]*waiter // name\x00id → queued request
	queuedPeak   int                // the most entries queued has had since it was made
	closed       bool
	wal          *wal
	segNo        uint64
	snapshotting bool
	lastSnap     int64
	snapDone     chan struct{} // closed when the running snapshot ends
	onEnd        func(Reason, time.Duration)
	reserved     uint64        // tokens reserved in the log (fast.go)
	resDurable   uint64        // the largest reservation known to be on disk
	pendingRes   []reservation // reservations not yet known to be on disk
	mark         reserveMark   // the reservation mark outside the log (reserve.go)
	answers      []*waiter     // acquires to answer once s.mu is unlocked (acquire.go)

	holders, waiting                  atomic.Int64
	grants, expirations, forceRelease atomic.Uint64
	handoffs, earlyHandoffs           atomic.Uint64
}

// Interface guards.
var (
	_ sema.Backend       = (*Store)(nil)
	_ sema.Blocker       = (*Store)(nil)
	_ sema.Inspector     = (*Store)(nil)
	_ sema.ForceReleaser = (*Store)(nil)
	_ sema.ForceNotifier = (*Store)(nil)
	_ sema.Declarer      = (*Store)(nil)
)

// mono returns now on the store's monotonic clock, in nanoseconds.
func (s *Store) mono() int64 { return int64(time.Since(s.base)) }

// wall converts a monotonic instant to wall-clock time.
func (s *Store) wall(mono int64) time.Time { return s.base.Add(time.Duration(mono)).Round(0) }

// Guarantees declares what the store promises.
func (s *Store) Guarantees() sema.Guarantees {
	return sema.Guarantees{
		Scope: sema.ScopeProcess, FIFO: true, Linearizable: true, DurableFencing: true,
		Wakeup: "in-process channel",
		Notes: "grants are fsynced before they are returned, except handoffs on a contended name; " +
			"after a restart (even kill -9) leases on disk are honoured with a fresh full TTL, " +
			"contended names are fenced for one TTL, and tokens continue upward",
	}
}

// Stats returns running totals and gauges.
func (s *Store) Stats() Stats {
	return Stats{
		Grants: s.grants.Load(), Expirations: s.expirations.Load(), ForceReleases: s.forceRelease.Load(),
		Holders: s.holders.Load(), Waiters: s.waiting.Load(),
		Handoffs: s.handoffs.Load(), EarlyHandoffs: s.earlyHandoffs.Load(),
		Records: s.wal.appended(), Syncs: s.wal.syncs.Load(), SyncTime: time.Duration(s.wal.syncNs.Load()),
	}
}

// SetOnEnd sets a function called when a lease ends, with why and how
// long it was held (for metrics). It runs under the store's lock: it must
// be quick and must not call the store.
func (s *Store) SetOnEnd(fn func(reason Reason, held time.Duration)) {
	s.mu.Lock()
	defer s.unlock()
	s.onEnd = fn
}

// Err returns the error that stopped the log, if writing or fsyncing it
// ever failed: from then on the store grants nothing (see doc.go).
func (s *Store) Err() error {
	s.wal.mu.Lock()
	defer s.wal.mu.Unlock()
	return s.wal.failed
}

// Close fails every waiter with ErrClosed, writes and fsyncs the log and
// releases the data directory. A clean Close leaves no name fenced.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.unlock()
		return nil
	}
	s.closed = true
	for _, e := range s.names {
		for w := e.waiters.head; w != nil; w = e.waiters.head {
			s.dequeue(e, w)
			w.err = sema.ErrClosed
			s.answerLater(w)
		}
		if e.fast && e.fence == nil {
			// Every grant is on disk once the log closes: no fence
			// after a clean restart.
			s.wal.append(&record{kind: kindUnfast, name: e.name}, false)
		}
	}
	s.waiting.Store(0)
	if s.timer != nil {
		s.timer.Stop()
	}
	snap := s.snapDone
	s.unlock()
	if snap != nil {
		<-snap
	}
	err := s.wal.close()
	s.mark.wg.Wait()
	unlockDir(s.lock)
	return err
}
