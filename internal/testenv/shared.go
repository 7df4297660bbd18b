package testenv

import (
	"os"
	"sync"
	"testing"
)

// Shared servers: one of each per test binary, started on first use and
// stopped by Main.
var shared struct {
	mu       sync.Mutex
	redis    *Redis
	cluster  *RedisCluster
	postgres *Postgres
	etcd     *EtcdCluster
	stops    []func()
	usedMain bool
}

// Main runs the tests of a package (call it from TestMain) and then stops
// every shared server they started.
func Main(m *testing.M) {
	shared.mu.Lock()
	shared.usedMain = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	for i := len(shared.stops) - 1; i >= 0; i-- {
		shared.stops[i]()
	}
	shared.mu.Unlock()
	removeAll(semaBin.dir)
	os.Exit(code)
}

func mustMain(tb testing.TB) {
	tb.Helper()
	if !shared.usedMain {
		tb.Fatal("testenv: the shared servers need TestMain to call testenv.Main(m)")
	}
}

// SharedRedis returns this test binary's Redis (no persistence), starting
// it on first use. Tests sharing it use names of their own.
func SharedRedis(tb testing.TB) *Redis {
	tb.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	mustMain(tb)
	if shared.redis == nil {
		r := startRedis(tb, RedisOptions{}, false)
		shared.redis = r
		shared.stops = append(shared.stops, func() { r.Stop(0); removeAll(r.Dir) })
	}
	return shared.redis
}

// SharedRedisCluster returns this test binary's three-master Redis
// Cluster, starting it on first use.
func SharedRedisCluster(tb testing.TB) *RedisCluster {
	tb.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	mustMain(tb)
	if shared.cluster == nil {
		shared.cluster = startRedisCluster(tb)
		shared.stops = append(shared.stops, shared.cluster.stop)
	}
	return shared.cluster
}

// SharedPostgres returns this test binary's PostgreSQL, starting it on
// first use.
func SharedPostgres(tb testing.TB) *Postgres {
	tb.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	mustMain(tb)
	if shared.postgres == nil {
		p := startPostgres(tb)
		shared.postgres = p
		shared.stops = append(shared.stops, func() { p.Stop(2); removeAll(p.Dir) })
	}
	return shared.postgres
}

// SharedEtcd returns this test binary's one-member etcd, starting it on
// first use.
func SharedEtcd(tb testing.TB) *EtcdCluster {
	tb.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	mustMain(tb)
	if shared.etcd == nil {
		shared.etcd = startEtcd(tb, 1, nil)
		shared.stops = append(shared.stops, shared.etcd.stop)
	}
	return shared.etcd
}

func removeAll(dir string) {
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}
