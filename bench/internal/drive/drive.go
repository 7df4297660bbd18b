// Package drive runs a benchmark's operation from many goroutines at once:
// the load generator the comparison benchmarks share.
package drive

import (
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
