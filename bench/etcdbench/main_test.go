package etcdbench

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/etcd"
	"github.com/sema-dev/sema/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// Read once by TestMain. external names the endpoints of an etcd to use
// instead of starting one ($SEMA_BENCH_ETCD, comma-separated), to profile
// etcd itself; mutexFirst runs etcd's side of each pair first.
var (
	external   []string
	mutexFirst bool
)

func TestMain(m *testing.M) {
	if e := os.Getenv("SEMA_BENCH_ETCD"); e != "" {
		external = strings.Split(e, ",")
	}
	mutexFirst = os.Getenv("SEMA_BENCH_MUTEX_FIRST") != ""
	testenv.Main(m)
}

// endpoints returns the etcd of the benchmarks.
func endpoints(b *testing.B) []string {
	if external != nil {
		return external
	}
	return testenv.SharedEtcd(b).Endpoints()
}

// etcdPID returns the PID of the etcd started for the benchmarks (0 for an
// external one).
func etcdPID(b *testing.B) int {
	if external != nil {
		return 0
	}
	return testenv.SharedEtcd(b).Members[0].PID()
}

var bg = context.Background()

// clients is the number of contenders of the hot-name and distinct-name
// benchmarks.
const clients = 64

// runID makes names unique per benchmark run.
func runID() string { return strings.ToLower(rand.Text()[:10]) }

// newSema returns n sema clients, each over a backend (an etcd
// connection) of its own, closed with b.
func newSema(b *testing.B, n int) []*sema.Client {
	b.Helper()
	cs := make([]*sema.Client, n)
	for i := range cs {
		be, err := etcd.Open(bg, etcd.Config{Endpoints: endpoints(b), Prefix: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		cs[i] = sema.New(be)
		b.Cleanup(func() { _ = cs[i].Close() })
	}
	return cs
}

// newEtcdClient returns a client of etcd's own (a connection of its own),
// closed with b.
func newEtcdClient(b *testing.B) *clientv3.Client {
	b.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(b), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cli.Close() })
	return cli
}

// newMutexes returns n etcd mutexes on pfx, each with a session (an etcd
// lease kept alive, TTL 15s as sema's default) and a connection of its own.
func newMutexes(b *testing.B, n int, pfx string) []*concurrency.Mutex {
	b.Helper()
	ms := make([]*concurrency.Mutex, n)
	for i := range ms {
		s, err := concurrency.NewSession(newEtcdClient(b), concurrency.WithTTL(15))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() }) // before its client's Close (cleanups run last first)
		ms[i] = concurrency.NewMutex(s, pfx)
	}
	return ms
}

// procCPU returns the CPU time process pid has used (0 if unknown).
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// cpuMeter reports the CPU per operation of this process and of etcd.
type cpuMeter struct{ self, etcd time.Duration }

func startCPU(b *testing.B) cpuMeter {
	return cpuMeter{self: procCPU(os.Getpid()), etcd: procCPU(etcdPID(b))}
}

func (m cpuMeter) report(b *testing.B, ops int) {
	n := float64(ops)
	b.ReportMetric(float64((procCPU(os.Getpid())-m.self).Microseconds())/n, "client-cpu-us/op")
	b.ReportMetric(float64((procCPU(etcdPID(b))-m.etcd).Microseconds())/n, "etcd-cpu-us/op")
}

// newSharedMutexes returns n etcd mutexes on pfx over one connection, each
// with a session of its own (a shared session would make them reentrant).
func newSharedMutexes(b *testing.B, n int, pfx string) []*concurrency.Mutex {
	b.Helper()
	cli := newEtcdClient(b)
	ms := make([]*concurrency.Mutex, n)
	for i := range ms {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(15))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		ms[i] = concurrency.NewMutex(s, pfx)
	}
	return ms
}

// handoffs counts acquisitions by another client than the last holder.
type handoffs struct {
	last  atomic.Int64
	count atomic.Int64
	same  atomic.Int64
}

func newHandoffs() *handoffs {
	h := &handoffs{}
	h.last.Store(-1)
	return h
}

// acquired is called by worker while it holds the lock.
func (h *handoffs) acquired(worker int) {
	switch prev := h.last.Swap(int64(worker)); {
	case prev == int64(worker):
		h.same.Add(1)
	case prev >= 0:
		h.count.Add(1)
	}
}
