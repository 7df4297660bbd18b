package netbench

import (
	"fmt"
	"github.com/sema-dev/sema/bench/internal/drive"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
	"github.com/sema-dev/sema"
)

// BenchmarkDistinct: 64 clients, each on its own name,
// acquire and release as fast as they can. Metric: pairs/s, and the CPU
// each pair costs this process and the sema server.
func BenchmarkDistinct(b *testing.B) {
	// sema: the blocking Acquire (a long poll that is answered at once);
	// sema-try: TryAcquire, the same work as redislock's Obtain without a
	// retry strategy.
	for _, try := range []bool{false, true} {
		label := "sema"
		if try {
			label = "sema-try"
		}
		b.Run(label, func(b *testing.B) {
			c := newSema(b, srv)
			id := runID()
			mus := make([]*sema.Semaphore, clients)
			for i := range mus {
				mus[i] = c.Mutex(fmt.Sprintf("bench/distinct/%s/%d", id, i))
			}
			cpu := startCPU(srv)
			elapsed := drive.Run(b, clients, func(w int) error {
				acquire := mus[w].Acquire
				if try {
					acquire = mus[w].TryAcquire
				}
				l, err := acquire(bg)
				if err != nil {
					return err
				}
				return l.Release(bg)
			})
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pairs/s")
			cpu.report(b)
		})
	}
	b.Run("redislock", func(b *testing.B) {
		rc := newRedis(b)
		locker := redislock.New(rc)
		id := runID()
		keys := make([]string, clients)
		for i := range keys {
			keys[i] = fmt.Sprintf("bench:distinct:%s:%d", id, i)
		}
		cpu := startCPU(nil)
		elapsed := drive.Run(b, clients, func(w int) error {
			l, err := locker.Obtain(bg, keys[w], 15*time.Second, nil)
			if err != nil {
				return err
			}
			return l.Release(bg)
		})
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pairs/s")
		cpu.report(b)
	})
}

// newRedis returns a client of the local Redis with a pool for every
// client, or skips.
func newRedis(b *testing.B) *redis.Client {
	b.Helper()
	if redisURL == "" {
		b.Skip("SEMA_TEST_REDIS_URL not set (scripts/services.sh start redis)")
	}
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		b.Fatal(err)
	}
	opt.PoolSize = clients
	opt.MinIdleConns = clients
	rc := redis.NewClient(opt)
	b.Cleanup(func() { _ = rc.Close() })
	if err := rc.Ping(bg).Err(); err != nil {
		b.Fatal(err)
	}
	return rc
}
