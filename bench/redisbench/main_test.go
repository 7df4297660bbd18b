package redisbench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredis "github.com/redis/go-redis/v9"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/redis"
	"github.com/sema-dev/sema/internal/testenv"
)

// reverse runs the systems of a benchmark in reverse order (redsync,
// redislock, sema), for alternate rounds; read once, by TestMain.
var reverse bool

func TestMain(m *testing.M) {
	reverse = os.Getenv("SEMA_BENCH_REVERSE") == "1"
	testenv.Main(m)
}

// system is one contender of a comparison.
type system struct {
	name string
	run  func(*testing.B)
}

// compare runs each system as a sub-benchmark, in order or, in alternate
// rounds, reversed, so that no system always runs first.
func compare(b *testing.B, systems ...system) {
	if reverse {
		slices.Reverse(systems)
	}
	for _, s := range systems {
		b.Run(s.name, s.run)
	}
}

var bg = context.Background()

// contenders is the number of clients of the hot-name and distinct-name
// benchmarks.
const contenders = 64

// ttl is every lock's TTL.
const ttl = 15 * time.Second

// server is this run's redis-server, shared by every system.
func server(b *testing.B) *testenv.Redis { return testenv.SharedRedis(b) }

// newSema returns a sema client on its own Redis backend, with a pool of
// size conns (as the other systems' clients).
func newSema(b *testing.B, conns int) *sema.Client {
	b.Helper()
	rb, err := redis.Open(bg, fmt.Sprintf("%s?pool_size=%d&min_idle_conns=%d", server(b).URL(), conns, conns))
	if err != nil {
		b.Fatal(err)
	}
	c := sema.New(rb)
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// newRedis returns a go-redis client with a pool of size conns.
func newRedis(b *testing.B, conns int) *goredis.Client {
	b.Helper()
	opt, err := goredis.ParseURL(server(b).URL())
	if err != nil {
		b.Fatal(err)
	}
	opt.PoolSize, opt.MinIdleConns = conns, conns
	rc := goredis.NewClient(opt)
	b.Cleanup(func() { _ = rc.Close() })
	if err := rc.Ping(bg).Err(); err != nil {
		b.Fatal(err)
	}
	return rc
}

// The competitors, set up as their documentation shows.

func newRedislock(b *testing.B, conns int) *redislock.Client {
	return redislock.New(newRedis(b, conns))
}

// redislockWait is how redislock waits for a taken lock.
var redislockWait = &redislock.Options{RetryStrategy: redislock.LinearBackoff(100 * time.Millisecond)}

func newRedsync(b *testing.B, conns int) *redsync.Redsync {
	return redsync.New(rsredis.NewPool(newRedis(b, conns)))
}

// redsyncMutex waits with redsync's default delays, until it gets the lock.
func redsyncMutex(rs *redsync.Redsync, name string) *redsync.Mutex {
	return rs.NewMutex(name, redsync.WithExpiry(ttl), redsync.WithTries(1<<30))
}

// turns records who held the hot lock, in order, and how long each
// acquisition waited. Workers call held while they hold the lock, so the
// calls are serialized by the lock itself (the mutex only keeps the race
// detector informed).
type turns struct {
	mu       sync.Mutex
	last     int
	handoffs int             // grants to another worker than the last holder
	again    int             // grants to the last holder again
	waits    []time.Duration // of every acquisition
	hwaits   []time.Duration // of the hand-offs
	cpu0     time.Duration   // the server's CPU time when measuring began
}

func newTurns() *turns { return &turns{last: -1} }

// redisCPU returns the CPU time the server at addr has used (INFO cpu).
func redisCPU(addr string) (time.Duration, error) {
	rc := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rc.Close()
	info, err := rc.Info(bg, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second)), nil
}

func (t *turns) held(worker int, waited time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.last == worker:
		t.again++
	case t.last >= 0:
		t.handoffs++
		t.hwaits = append(t.hwaits, waited)
	}
	t.last = worker
	t.waits = append(t.waits, waited)
}

func (t *turns) report(b *testing.B, elapsed time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.waits)
	if c, err := redisCPU(server(b).Addr); err == nil && t.cpu0 > 0 {
		b.ReportMetric(float64((c-t.cpu0).Microseconds())/float64(max(n, 1)), "redis-cpu-us/op")
	}
	b.ReportMetric(float64(t.handoffs)/elapsed.Seconds(), "handoffs/s")
	b.ReportMetric(float64(n)/elapsed.Seconds(), "acq/s")
	b.ReportMetric(100*float64(t.again)/float64(max(n, 1)), "same-holder-%")
	percentiles(b, "wait", t.waits)
	percentiles(b, "handoff-wait", t.hwaits)
}

// percentiles reports the p50, p99 and max of ws in ms, as name-p50-ms…
func percentiles(b *testing.B, name string, ws []time.Duration) {
	n := len(ws)
	if n == 0 {
		return
	}
	slices.Sort(ws)
	q := func(p float64) float64 { return float64(ws[min(n-1, int(p*float64(n)))]) / 1e6 }
	b.ReportMetric(q(0.50), name+"-p50-ms")
	b.ReportMetric(q(0.99), name+"-p99-ms")
	b.ReportMetric(float64(ws[n-1])/1e6, name+"-max-ms")
}

// cpuMeter reports the CPU time per operation of this process and of the
// server.
type cpuMeter struct{ self, server time.Duration }

func startCPU(b *testing.B) cpuMeter {
	srv, err := redisCPU(server(b).Addr)
	if err != nil {
		b.Fatal(err)
	}
	return cpuMeter{selfCPU(), srv}
}

func (m cpuMeter) report(b *testing.B) {
	srv, err := redisCPU(server(b).Addr)
	if err != nil {
		b.Fatal(err)
	}
	n := float64(b.N)
	b.ReportMetric(float64((selfCPU()-m.self).Microseconds())/n, "client-cpu-us/op")
	b.ReportMetric(float64((srv-m.server).Microseconds())/n, "redis-cpu-us/op")
}

// selfCPU returns the CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
