package store

import (
	"context"
	"crypto/rand"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

// BenchmarkStoreDistinct: 64 goroutines acquire and release their own
// names (one op = a pair), with the durable log.
func BenchmarkStoreDistinct(b *testing.B) {
	s, err := Open(Config{Dir: b.TempDir(), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var next atomic.Int64
	var wg sync.WaitGroup
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for g := range 64 {
		wg.Go(func() {
			r := sema.Request{Name: fmt.Sprint("n", g), Limit: 1, Weight: 1, TTL: time.Minute}
			for i := 0; next.Add(1) <= int64(b.N); i++ {
				r.ID = fmt.Sprint("id", i)
				if _, err := s.TryAcquire(ctx, r); err != nil {
					b.Error(err)
					return
				}
				if err := s.Release(ctx, r.Name, r.ID); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pairs/s")
}

// BenchmarkHeldLeaseMemory holds b.N leases on distinct names and reports
// the heap per held lease (run with -benchtime=1000000x).
func BenchmarkHeldLeaseMemory(b *testing.B) {
	s, err := Open(Config{Dir: b.TempDir(), Logger: quiet, SnapshotBytes: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ctx := context.Background()
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 { // grants wait for the group commit: fill in parallel
		wg.Go(func() {
			r := sema.Request{Limit: 1, Weight: 1, TTL: time.Hour, Owner: "worker-host-17:4242", Host: "worker-host-17", PID: 4242}
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				r.Name = fmt.Sprintf("jobs/tenant-%d/resource-%d", i%1000, i)
				r.ID = rand.Text()
				if _, err := s.TryAcquire(ctx, r); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "heap-bytes/lease")
	if st := s.Stats(); st.Holders != int64(b.N) {
		b.Fatalf("%d holders", st.Holders)
	}
}
