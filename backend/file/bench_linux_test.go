package file_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/mem"
	"golang.org/x/sys/unix"
)

// Uncontended acquire+release of one name by one goroutine: through the
// sema client (keepalive on) against bare flock(2) doing the same work,
// with the lock file opened per acquisition (what a named lock costs with
// flock, as flock(1) or PHP's fopen+flock do) and with a descriptor kept
// open (a lower bound no named-lock library can reach).
func BenchmarkUncontended(b *testing.B) {
	b.Run("sema", func(b *testing.B) {
		be := open(b, b.TempDir())
		c := sema.New(be)
		defer c.Close()
		m := c.Mutex("bench")
		ctx := context.Background()
		for b.Loop() {
			l, err := m.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("backend-only", func(b *testing.B) { // the file backend without the core
		be := open(b, b.TempDir())
		defer be.Close()
		ctx := context.Background()
		req := sema.Request{Name: "bench", ID: "bench-id", Limit: 1, Weight: 1, TTL: sema.DefaultTTL}
		for b.Loop() {
			if _, err := be.Acquire(ctx, req); err != nil {
				b.Fatal(err)
			}
			if err := be.Release(ctx, req.Name, req.ID); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mem", func(b *testing.B) { // the core over the in-process backend
		c := sema.New(mem.New())
		defer c.Close()
		m := c.Mutex("bench")
		ctx := context.Background()
		for b.Loop() {
			l, err := m.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("flock-open", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "bench.lock")
		for b.Loop() {
			fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
			if err != nil {
				b.Fatal(err)
			}
			flock(b, fd, unix.LOCK_EX)
			flock(b, fd, unix.LOCK_UN)
			unix.Close(fd)
		}
	})
	b.Run("flock-osfile", func(b *testing.B) { // the same through os.File, as Go code usually does
		path := filepath.Join(b.TempDir(), "bench.lock")
		for b.Loop() {
			f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
			if err != nil {
				b.Fatal(err)
			}
			flock(b, int(f.Fd()), unix.LOCK_EX)
			flock(b, int(f.Fd()), unix.LOCK_UN)
			f.Close()
		}
	})
	b.Run("flock-fd", func(b *testing.B) {
		f, err := os.OpenFile(filepath.Join(b.TempDir(), "bench.lock"), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		fd := int(f.Fd())
		for b.Loop() {
			flock(b, fd, unix.LOCK_EX)
			flock(b, fd, unix.LOCK_UN)
		}
	})
}

func flock(b *testing.B, fd, how int) {
	for {
		err := unix.Flock(fd, how)
		if err == nil {
			return
		}
		if err != unix.EINTR {
			b.Fatal(err)
		}
	}
}

// hotStats measures a hot name: contenders loop acquire/release; each
// records its wait, and whether it took over from another contender (a
// handoff) or re-acquired right after its own release.
type hotStats struct {
	last     atomic.Int64 // contender that acquired last
	handoffs atomic.Int64
	mu       sync.Mutex
	waits    []time.Duration
}

// run has n contenders share b.N acquisitions; acquire returns a release.
func (s *hotStats) run(b *testing.B, n int, acquire func(who int) func()) {
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for who := range n {
		wg.Go(func() {
			waits := make([]time.Duration, 0, b.N/n+1)
			for left.Add(-1) >= 0 {
				t := time.Now()
				release := acquire(who)
				waits = append(waits, time.Since(t))
				if s.last.Swap(int64(who)) != int64(who) {
					s.handoffs.Add(1)
				}
				release()
			}
			s.mu.Lock()
			s.waits = append(s.waits, waits...)
			s.mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(s.waits)
	q := func(p float64) float64 {
		return float64(s.waits[min(len(s.waits)-1, int(p*float64(len(s.waits))))].Microseconds())
	}
	b.ReportMetric(float64(s.handoffs.Load())/elapsed.Seconds(), "handoffs/s")
	b.ReportMetric(100*(1-float64(s.handoffs.Load())/float64(b.N)), "%self-reacquire")
	b.ReportMetric(q(0.5), "p50-wait-µs")
	b.ReportMetric(q(0.99), "p99-wait-µs")
	b.ReportMetric(float64(s.waits[len(s.waits)-1].Microseconds()), "max-wait-µs")
}

// A hot name with 64 goroutine contenders: sema's FIFO queue against bare
// flock(2), each contender with its own descriptor.
func BenchmarkHotName(b *testing.B) {
	const n = 64
	b.Run("sema", func(b *testing.B) {
		be := open(b, b.TempDir())
		c := sema.New(be)
		defer c.Close()
		m := c.Mutex("hot")
		ctx := context.Background()
		new(hotStats).run(b, n, func(int) func() {
			l, err := m.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			return func() {
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("flock", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "hot.lock")
		fds := make([]int, n)
		for i := range fds {
			fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
			if err != nil {
				b.Fatal(err)
			}
			defer unix.Close(fd)
			fds[i] = fd
		}
		new(hotStats).run(b, n, func(who int) func() {
			flock(b, fds[who], unix.LOCK_EX)
			return func() { flock(b, fds[who], unix.LOCK_UN) }
		})
	})
}

// A release in one process → Acquire returns in another: the hand-off
// across processes, woken by inotify. It ping-pongs one mutex with a helper
// process, measuring both directions; both sides read the host's wall
// clock.
func BenchmarkCrossProcessHandoff(b *testing.B) {
	dir := b.TempDir()
	c := sema.New(open(b, dir))
	defer c.Close()
	m := c.Mutex("ping")
	ctx := context.Background()
	l, err := m.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	h := startHelper(b, "relay", envDir+"="+dir, envName+"=ping", envArg+"="+strconv.Itoa(b.N))
	lat := make([]time.Duration, 0, 2*b.N)
	type acq struct {
		l  *sema.Lease
		at time.Time
	}
	for range b.N {
		waitQueued(b, dir, "ping", 1)
		t0 := time.Now()
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Duration(atoi64(b, h.expect("granted", 10*time.Second)[0])-t0.UnixNano()))
		got := make(chan acq, 1)
		go func() {
			l, err := m.Acquire(ctx)
			if err != nil {
				b.Error(err)
			}
			got <- acq{l, time.Now()}
		}()
		waitQueued(b, dir, "ping", 1)
		io.WriteString(h.stdin, "next\n")
		t2 := atoi64(b, h.expect("releasing", 10*time.Second)[0])
		a := <-got
		if a.l == nil {
			b.FailNow()
		}
		l = a.l
		lat = append(lat, time.Duration(a.at.UnixNano()-t2))
	}
	l.Release(ctx)
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(0, "ns/op")
}
