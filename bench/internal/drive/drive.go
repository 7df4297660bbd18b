// Package drive runs a benchmark's operation from many goroutines at once:
// the load generator the comparison benchmarks share.
package drive

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Run runs n goroutines that together call op b.N times, and returns the
// elapsed wall time. The first error stops every goroutine and fails the
// benchmark.
func Run(b *testing.B, n int, op func(worker int) error) time.Duration {
	b.Helper()
	var (
		next   atomic.Int64
		wg     sync.WaitGroup
		once   sync.Once
		failed error
	)
	b.ResetTimer()
	start := time.Now()
	for w := range n {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := op(w); err != nil {
					once.Do(func() { failed = err })
					next.Store(int64(b.N)) // stop everyone
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if failed != nil {
		b.Fatal(failed)
	}
	return elapsed
}

// WarmUp has every one of n workers call op once, all at once and untimed,
// so that a benchmark measures each system in its steady state:
// connections open, sessions and server-side plans ready.
func WarmUp(b *testing.B, n int, op func(worker int) error) {
	b.Helper()
	errs := make(chan error, n)
	for w := range n {
		go func() { errs <- op(w) }()
	}
	for range n {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

// Waits collects acquisition waits per worker, without locking: each
// worker appends to its own slice.
type Waits [][]time.Duration

// NewWaits returns the waits of n workers.
func NewWaits(n int) Waits { return make(Waits, n) }

// Add records a wait of worker.
func (w Waits) Add(worker int, d time.Duration) { w[worker] = append(w[worker], d) }

// Report adds the waits' p50, p99 and maximum (in ms) to b's metrics.
func (w Waits) Report(b *testing.B) {
	var all []time.Duration
	for _, ws := range w {
		all = append(all, ws...)
	}
	if len(all) == 0 {
		return
	}
	slices.Sort(all)
	q := func(p float64) float64 {
		return float64(all[min(len(all)-1, int(p*float64(len(all))))]) / 1e6
	}
	b.ReportMetric(q(0.50), "wait-p50-ms")
	b.ReportMetric(q(0.99), "wait-p99-ms")
	b.ReportMetric(float64(all[len(all)-1])/1e6, "wait-max-ms")
}
