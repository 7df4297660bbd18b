package netbench

import (
	"context"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/remote"
)

// Sizes of BenchmarkHeld.
const (
	heldLeases  = 1_000_000
	heldWorkers = 256
	waiters     = 10_000
)

// BenchmarkHeld, opt-in (SEMA_BENCH_HEAVY=1): a fresh
// server holds 1,000,000 leases on distinct names (TTL 1 h, no keepalive)
// acquired by 256 concurrent clients, then queues 10,000 waiters on one
// name and lets them through one by one. It fails on any error and reports
// the server's RSS and memory per held lease and per waiter. One iteration
// takes about a minute; run it with -benchtime=1x.
func BenchmarkHeld(b *testing.B) {
	if !heavy {
		b.Skip("set SEMA_BENCH_HEAVY=1 to hold 1,000,000 leases and 10,000 waiters")
	}
	for range b.N {
		heldOnce(b)
	}
}

func heldOnce(b *testing.B) {
	s, err := startServer(filepath.Join(b.TempDir(), "data"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.kill()
	rb, err := remote.New(remote.Config{URL: s.url, MaxIdleConns: 2 * heldWorkers, RequestTimeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer rb.Close()
	ctx, cancel := context.WithTimeout(bg, 10*time.Minute)
	defer cancel()
	rss0 := mustRSS(b, s)

	// 1,000,000 held leases.
	var next, fails atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range heldWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= heldLeases || ctx.Err() != nil {
					return
				}
				n := strconv.FormatInt(i, 10)
				_, err := rb.TryAcquire(ctx, sema.Request{
					Name: "held/" + n, ID: "h" + n, Owner: "bench", Limit: 1, Weight: 1, TTL: time.Hour,
				})
				if err != nil {
					fails.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	acquireTime := time.Since(start)
	if n := fails.Load(); n > 0 {
		b.Fatalf("%d of %d acquires failed, first: %v", n, heldLeases, firstErr.Load())
	}
	st, err := rb.Describe(ctx, "held/"+strconv.Itoa(heldLeases-1))
	if err != nil || len(st.Holders) != 1 {
		b.Fatalf("last lease not held: %+v %v", st, err)
	}
	rss1 := mustRSS(b, s)

	// 10,000 waiters on one name, granted one after the other.
	const name = "held/waiters"
	req := func(id string) sema.Request {
		return sema.Request{Name: name, ID: id, Owner: "bench", Limit: 1, Weight: 1, TTL: time.Minute}
	}
	holder, err := rb.TryAcquire(ctx, req("holder"))
	if err != nil {
		b.Fatal(err)
	}
	var granted atomic.Int64
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := rb.Acquire(ctx, req("w"+strconv.Itoa(i)))
			if err == nil {
				granted.Add(1)
				err = rb.Release(ctx, name, g.ID)
			}
			if err != nil {
				fails.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
		}()
	}
	queued := time.Now()
	for {
		st, err := rb.Describe(ctx, name)
		if err == nil && len(st.Waiters) == waiters {
			break
		}
		if n := fails.Load(); n > 0 || time.Since(queued) > 3*time.Minute {
			b.Fatalf("waiters did not queue: %d failed (first %v), describe: %d waiters, %v",
				n, firstErr.Load(), len(st.Waiters), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	queueTime := time.Since(queued)
	rss2 := mustRSS(b, s)
	drained := time.Now()
	if err := rb.Release(ctx, name, holder.ID); err != nil {
		b.Fatal(err)
	}
	wg.Wait()
	drainTime := time.Since(drained)
	if n := fails.Load(); n > 0 || granted.Load() != waiters {
		b.Fatalf("%d waiters failed (first %v), %d granted", n, firstErr.Load(), granted.Load())
	}

	const mb = 1 << 20
	b.ReportMetric(float64(heldLeases)/acquireTime.Seconds(), "held-acq/s")
	b.ReportMetric(float64(rss0)/mb, "rss-start-MB")
	b.ReportMetric(float64(rss1)/mb, "rss-held-MB")
	b.ReportMetric(float64(rss1-rss0)/heldLeases, "B/lease")
	b.ReportMetric(float64(rss2)/mb, "rss-waiters-MB")
	b.ReportMetric(float64(rss2-rss1)/waiters, "B/waiter")
	b.ReportMetric(queueTime.Seconds(), "queue-s")
	b.ReportMetric(float64(waiters)/drainTime.Seconds(), "drain-handoffs/s")
	b.Logf("held %d leases in %v; %d waiters queued in %v, drained in %v; RSS %d → %d → %d MiB",
		heldLeases, acquireTime.Round(time.Millisecond), waiters, queueTime.Round(time.Millisecond),
		drainTime.Round(time.Millisecond), rss0/mb, rss1/mb, rss2/mb)
}

func mustRSS(b *testing.B, s *server) int64 {
	b.Helper()
	n, err := s.rssBytes()
	if err != nil {
		b.Fatal(err)
	}
	return n
}
