package sema_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/mem"
)

// Each benchmark runs sema over the memory backend (lease, keepalive timer,
// local deadline and all) next to golang.org/x/sync/semaphore doing the same
// work, so the ratio comes from one run on one machine.

// locker is the work both implementations do.
type locker interface {
	lock(ctx context.Context) (unlock func())
}

type semaLocker struct{ s *sema.Semaphore }

func (l semaLocker) lock(ctx context.Context) func() {
	lease, err := l.s.Acquire(ctx)
	if err != nil {
		panic(err)
	}
	return func() {
		if err := lease.Release(ctx); err != nil {
			panic(err)
		}
	}
}

type xsyncLocker struct{ w *semaphore.Weighted }

func (l xsyncLocker) lock(ctx context.Context) func() {
	if err := l.w.Acquire(ctx, 1); err != nil {
		panic(err)
	}
	return func() { l.w.Release(1) }
}

func impls(limit int64) map[string]func(name string) locker {
	c := sema.New(mem.New())
	return map[string]func(string) locker{
		"sema":  func(name string) locker { return semaLocker{c.Semaphore(name, limit)} },
		"xsync": func(string) locker { return xsyncLocker{semaphore.NewWeighted(limit)} },
	}
}

func forEachImpl(b *testing.B, limit int64, fn func(b *testing.B, mk func(string) locker)) {
	im := impls(limit)
	for _, name := range []string{"sema", "xsync"} {
		b.Run(name, func(b *testing.B) { fn(b, im[name]) })
	}
}

// BenchmarkUncontended: one goroutine, acquire+release of a free mutex.
func BenchmarkUncontended(b *testing.B) {
	forEachImpl(b, 1, func(b *testing.B, mk func(string) locker) {
		l := mk("uncontended")
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			l.lock(ctx)()
		}
	})
}

// BenchmarkDistinctNames64: 64 goroutines, each on its own name.
func BenchmarkDistinctNames64(b *testing.B) {
	forEachImpl(b, 1, func(b *testing.B, mk func(string) locker) {
		var next atomic.Int64
		ctx := context.Background()
		b.SetParallelism(64 / max(1, testingProcs()))
		b.RunParallel(func(pb *testing.PB) {
			l := mk(fmt.Sprintf("distinct-%d", next.Add(1)))
			for pb.Next() {
				l.lock(ctx)()
			}
		})
	})
}

func testingProcs() int { return runtimeProcs() }

// BenchmarkHotMutex64: 64 goroutines on one mutex. Reports handoffs/s
// (acquisitions by another goroutine than the last holder), the handoff
// latency from one holder's release to the next holder's grant, and the
// longest wait for one acquisition.
func BenchmarkHotMutex64(b *testing.B) {
	hot(b, 1, 64)
}

// BenchmarkSemaphore3Workers50: a limit-3 semaphore shared by 50 workers.
func BenchmarkSemaphore3Workers50(b *testing.B) {
	hot(b, 3, 50)
}

func hot(b *testing.B, limit int64, workers int) {
	forEachImpl(b, limit, func(b *testing.B, mk func(string) locker) {
		l := mk("hot")
		ctx := context.Background()
		var (
			mu          sync.Mutex // guards the fields below (needed when limit > 1)
			last        = -1
			lastRelease time.Time
			handoffs    int
			latencies   []time.Duration
			maxWait     time.Duration
		)
		var remaining atomic.Int64
		remaining.Store(int64(b.N))
		var wg sync.WaitGroup
		b.ResetTimer()
		start := time.Now()
		for id := range workers {
			wg.Go(func() {
				for remaining.Add(-1) >= 0 {
					t0 := time.Now()
					unlock := l.lock(ctx)
					now := time.Now()
					mu.Lock()
					maxWait = max(maxWait, now.Sub(t0))
					if last != id && last != -1 {
						handoffs++
						latencies = append(latencies, now.Sub(lastRelease))
					}
					last = id
					lastRelease = time.Now()
					mu.Unlock()
					unlock()
				}
			})
		}
		wg.Wait()
		el := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(handoffs)/el.Seconds(), "handoffs/s")
		b.ReportMetric(100*float64(handoffs)/float64(b.N), "handoff-%")
		b.ReportMetric(float64(maxWait.Microseconds())/1000, "max-wait-ms")
		if len(latencies) > 0 {
			slices.Sort(latencies)
			b.ReportMetric(float64(latencies[len(latencies)/2].Nanoseconds())/1000, "handoff-p50-µs")
			b.ReportMetric(float64(latencies[len(latencies)*99/100].Nanoseconds())/1000, "handoff-p99-µs")
		}
	})
}
