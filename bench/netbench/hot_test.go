package netbench

import (
	"github.com/sema-dev/sema/bench/internal/drive"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BenchmarkHotName: 64 clients take turns on one lock.
// Metrics: handoffs/s (acquisitions by another client than the last
// holder), acquisitions/s, and the wait for the lock (p50, p99, max).
func BenchmarkHotName(b *testing.B) {
	b.Run("sema", func(b *testing.B) {
		mu := newSema(b, srv).Mutex("bench/hot/" + runID())
		ws, hs := drive.NewWaits(clients), newHandoffs()
		cpu := startCPU(srv)
		elapsed := drive.Run(b, clients, func(w int) error {
			start := time.Now()
			l, err := mu.Acquire(bg)
			if err != nil {
				return err
			}
			ws.Add(w, time.Since(start))
			hs.acquired(w)
			return l.Release(bg)
		})
		reportHot(b, elapsed, ws, hs)
		cpu.report(b)
	})
	b.Run("pg-advisory", func(b *testing.B) {
		if pgURL == "" {
			b.Skip("SEMA_TEST_POSTGRES_URL not set (scripts/services.sh start postgres)")
		}
		conns := make([]*pgx.Conn, clients)
		for i := range conns {
			c, err := pgx.Connect(bg, pgURL)
			if err != nil {
				b.Fatal(err)
			}
			conns[i] = c
			b.Cleanup(func() { _ = c.Close(bg) })
		}
		key := rand.Int64()
		ws, hs := drive.NewWaits(clients), newHandoffs()
		cpu := startCPU(nil)
		elapsed := drive.Run(b, clients, func(w int) error {
			start := time.Now()
			if _, err := conns[w].Exec(bg, "SELECT pg_advisory_lock($1)", key); err != nil {
				return err
			}
			ws.Add(w, time.Since(start))
			hs.acquired(w)
			_, err := conns[w].Exec(bg, "SELECT pg_advisory_unlock($1)", key)
			return err
		})
		reportHot(b, elapsed, ws, hs)
		cpu.report(b)
	})
}

func reportHot(b *testing.B, elapsed time.Duration, ws drive.Waits, hs *handoffs) {
	b.ReportMetric(float64(hs.count.Load())/elapsed.Seconds(), "handoffs/s")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acq/s")
	ws.Report(b)
}
