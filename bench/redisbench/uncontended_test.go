package redisbench

import (
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sema-dev/sema"
)

// noop is a script that does nothing: two calls of it (EVALSHA) are the
// least that any acquire+release made of two script calls can cost, as
// sema's and redislock's are.
var noop = goredis.NewScript("return 1")

// BenchmarkUncontended interleaves, b.N times: a PING, a sema
// Acquire+Release, a redislock Obtain+Release, a redsync Lock+Unlock, each
// on its own free lock, and two calls of a script that does nothing; it
// reports the mean time of each and its time in PINGs.
func BenchmarkUncontended(b *testing.B) {
	rc := newRedis(b, 1)
	mu := newSema(b, 1).Mutex("bench/uncontended", sema.WithTTL(ttl))
	locker := newRedislock(b, 1)
	rs := redsyncMutex(newRedsync(b, 1), "bench:uncontended:redsync")
	noopKeys := []string{"bench:uncontended:noop"}
	var ping, pair, rl, rsync, floor time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if err := rc.Ping(bg).Err(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		l, err := mu.Acquire(bg)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(bg); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		lk, err := locker.Obtain(bg, "bench:uncontended:redislock", ttl, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := lk.Release(bg); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		if err := rs.LockContext(bg); err != nil {
			b.Fatal(err)
		}
		if _, err := rs.UnlockContext(bg); err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		for range 2 {
			if err := noop.Run(bg, rc, noopKeys, "x").Err(); err != nil {
				b.Fatal(err)
			}
		}
		t5 := time.Now()
		ping, pair, rl, rsync = ping+t1.Sub(t0), pair+t2.Sub(t1), rl+t3.Sub(t2), rsync+t4.Sub(t3)
		floor += t5.Sub(t4)
	}
	b.StopTimer()
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
	b.ReportMetric(us(ping), "ping-us")
	b.ReportMetric(us(pair), "sema-us")
	b.ReportMetric(us(rl), "redislock-us")
	b.ReportMetric(us(rsync), "redsync-us")
	b.ReportMetric(us(floor), "noop-scripts-us")
	b.ReportMetric(float64(pair)/float64(ping), "sema-pings")
	b.ReportMetric(float64(rl)/float64(ping), "redislock-pings")
	b.ReportMetric(float64(rsync)/float64(ping), "redsync-pings")
	b.ReportMetric(float64(floor)/float64(ping), "noop-scripts-pings")
}
