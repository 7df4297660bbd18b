package netbench

import (
	"context"
	"crypto/rand"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/remote"
)

// clients is the number of concurrent clients of the rate benchmarks.
const clients = 64

// runID makes names unique per benchmark run on the shared server.
func runID() string { return strings.ToLower(rand.Text()[:10]) }

// newSema returns a sema client of the shared server, closed with b.
func newSema(b *testing.B, s *server) *sema.Client {
	b.Helper()
	if s == nil {
		b.Fatalf("no sema server: %v", srvErr)
	}
	rb, err := remote.New(remote.Config{URL: s.url, MaxIdleConns: 4 * clients})
	if err != nil {
		b.Fatal(err)
	}
	c := sema.New(rb)
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// handoffs counts acquisitions by a different client than the last holder.
type handoffs struct {
	last  atomic.Int64
	count atomic.Int64
}

func newHandoffs() *handoffs {
	h := &handoffs{}
	h.last.Store(-1)
	return h
}

// acquired is called by worker while it holds the lock.
func (h *handoffs) acquired(worker int) {
	if prev := h.last.Swap(int64(worker)); prev != int64(worker) && prev >= 0 {
		h.count.Add(1)
	}
}

var bg = context.Background()

// selfCPU returns the CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMeter reports CPU per operation of this process and, if set, of the
// sema server.
type cpuMeter struct {
	srv       *server
	self, sdb time.Duration
	fs        fsyncs
}

func startCPU(s *server) *cpuMeter {
	m := &cpuMeter{srv: s, self: selfCPU()}
	if s != nil {
		m.sdb = s.cpuTime()
		m.fs = s.fsyncs()
	}
	return m
}

func (m *cpuMeter) report(b *testing.B) {
	n := float64(b.N)
	b.ReportMetric(float64((selfCPU()-m.self).Microseconds())/n, "client-cpu-us/op")
	if m.srv != nil {
		b.ReportMetric(float64((m.srv.cpuTime()-m.sdb).Microseconds())/n, "server-cpu-us/op")
		if fs := m.srv.fsyncs(); fs.n > m.fs.n {
			b.ReportMetric((fs.n-m.fs.n)/n, "fsyncs/op")
			b.ReportMetric((fs.secs-m.fs.secs)/(fs.n-m.fs.n)*1e3, "fsync-ms")
		}
	}
}
