package etcdbench

import (
	"fmt"
	"github.com/sema-dev/sema/bench/internal/drive"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// pair runs etcd's sub-benchmark (named mutexName) and sema's, on the same
// etcd: sema's first unless $SEMA_BENCH_MUTEX_FIRST is set
// (scripts/bench-etcd.sh alternates it from round to round).
func pair(b *testing.B, mutexName string, mutexFn, semaFn func(*testing.B)) {
	if mutexFirst {
		b.Run(mutexName, mutexFn)
		b.Run("sema", semaFn)
		return
	}
	b.Run("sema", semaFn)
	b.Run(mutexName, mutexFn)
}

// BenchmarkUncontended: one client, acquire and release in a row. Beside
// sema and the mutex, "etcd-writes-only" is the floor of any lock's turn
// (see pairWritesOnly); it runs first when the mutex does, else last.
func BenchmarkUncontended(b *testing.B) {
	withFloor(b, pairWritesOnly, func() { uncontendedPair(b) })
}

// uncontendedPair runs sema and the mutex, in pair's order.
func uncontendedPair(b *testing.B) {
	pair(b, "etcd-mutex", func(b *testing.B) {
		m := newMutexes(b, 1, "/mutex/u/"+runID())[0]
		warmUp(b, 1, func(int) (func() error, error) { return lock(m) })
		elapsed := drive.Run(b, 1, func(int) error {
			if err := m.Lock(bg); err != nil {
				return err
			}
			return m.Unlock(bg)
		})
		b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N)/1e3, "ms/pair")
	}, func(b *testing.B) {
		mu := newSema(b, 1)[0].Mutex("u/" + runID())
		warmUp(b, 1, func(int) (func() error, error) { return acquire(mu) })
		elapsed := drive.Run(b, 1, func(int) error {
			l, err := mu.Acquire(bg)
			if err != nil {
				return err
			}
			return l.Release(bg)
		})
		b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N)/1e3, "ms/pair")
	})
}

// BenchmarkHotShared: 64 goroutines of this process, sharing one
// connection, take turns on one lock.
func BenchmarkHotShared(b *testing.B) {
	pair(b, "etcd-mutex", func(b *testing.B) {
		ms := newSharedMutexes(b, clients, "/mutex/hots/"+runID())
		hot(b, clients, func(w int) (func() error, error) { return lock(ms[w]) })
	}, func(b *testing.B) {
		mu := newSema(b, 1)[0].Mutex("hots/" + runID())
		hot(b, clients, func(int) (func() error, error) { return acquire(mu) })
	})
}

// BenchmarkHotName: 64 clients, each with a connection of its own as a
// process would have, take turns on one lock.
func BenchmarkHotName(b *testing.B) { hotName(b, clients) }

// BenchmarkHotFew: 4 clients take turns on one lock.
func BenchmarkHotFew(b *testing.B) { hotName(b, 4) }

// BenchmarkHotEight: 8 clients take turns on one lock: a queue short
// enough that a waiter's event comes a few milliseconds after its watch
// is made, so a watch left to etcd's catch-up loop stalls the queue.
func BenchmarkHotEight(b *testing.B) { hotName(b, 8) }

// hotName runs n clients on one lock: sema, the mutex, and beside them
// "etcd-writes-only", what the writes of a turn alone allow (see
// hotWritesOnly).
func hotName(b *testing.B, n int) {
	withFloor(b, func(b *testing.B) { hotWritesOnly(b, n) }, func() { hotPair(b, n) })
}

// hotPair runs sema and the mutex on one hot name, in pair's order.
func hotPair(b *testing.B, n int) {
	pair(b, "etcd-mutex", func(b *testing.B) {
		ms := newMutexes(b, n, "/mutex/hot/"+runID())
		hot(b, n, func(w int) (func() error, error) { return lock(ms[w]) })
	}, func(b *testing.B) {
		name := "hot/" + runID()
		mus := make([]*sema.Semaphore, n)
		for i, c := range newSema(b, n) {
			mus[i] = c.Mutex(name)
		}
		hot(b, n, func(w int) (func() error, error) { return acquire(mus[w]) })
	})
}

// lock locks m and returns its unlock.
func lock(m *concurrency.Mutex) (func() error, error) {
	if err := m.Lock(bg); err != nil {
		return nil, err
	}
	return func() error { return m.Unlock(bg) }, nil
}

// acquire takes s and returns its release.
func acquire(s *sema.Semaphore) (func() error, error) {
	l, err := s.Acquire(bg)
	if err != nil {
		return nil, err
	}
	return func() error { return l.Release(bg) }, nil
}

// hot drives n workers taking turns with lock and reports hand-offs/s,
// acquisitions/s, the share that went to the last holder, the waits, and
// the CPU per acquisition of this process and of etcd.
func hot(b *testing.B, n int, lock func(worker int) (func() error, error)) {
	warmUp(b, n, lock)
	ws, hs := drive.NewWaits(n), newHandoffs()
	cpu := startCPU(b)
	elapsed := drive.Run(b, n, func(w int) error {
		start := time.Now()
		unlock, err := lock(w)
		if err != nil {
			return err
		}
		ws.Add(w, time.Since(start))
		hs.acquired(w)
		return unlock()
	})
	b.ReportMetric(float64(hs.count.Load())/elapsed.Seconds(), "handoffs/s")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acq/s")
	b.ReportMetric(100*float64(hs.same.Load())/float64(b.N), "%same")
	ws.Report(b)
	cpu.report(b, b.N)
}

// warmUp has every worker take and give back the lock once (drive.WarmUp).
func warmUp(b *testing.B, n int, lock func(worker int) (func() error, error)) {
	drive.WarmUp(b, n, func(w int) error {
		unlock, err := lock(w)
		if err == nil {
			err = unlock()
		}
		return err
	})
}

// BenchmarkDistinct: 64 clients, each on a name of its own.
func BenchmarkDistinct(b *testing.B) {
	pair(b, "etcd-mutex", func(b *testing.B) {
		id := runID()
		ms := make([]*concurrency.Mutex, clients)
		for i := range ms {
			ms[i] = newMutexes(b, 1, fmt.Sprintf("/mutex/distinct/%s/%d", id, i))[0]
		}
		warmUp(b, clients, func(w int) (func() error, error) { return lock(ms[w]) })
		elapsed := drive.Run(b, clients, func(w int) error {
			if err := ms[w].Lock(bg); err != nil {
				return err
			}
			return ms[w].Unlock(bg)
		})
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pairs/s")
	}, func(b *testing.B) {
		id := runID()
		mus := make([]*sema.Semaphore, clients)
		for i, c := range newSema(b, clients) {
			mus[i] = c.Mutex(fmt.Sprintf("distinct/%s/%d", id, i))
		}
		warmUp(b, clients, func(w int) (func() error, error) { return acquire(mus[w]) })
		elapsed := drive.Run(b, clients, func(w int) error {
			release, err := acquire(mus[w])
			if err != nil {
				return err
			}
			return release()
		})
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pairs/s")
	})
}
