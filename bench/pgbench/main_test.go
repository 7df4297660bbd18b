package pgbench

import (
	"context"
	"crypto/rand"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sema-dev/sema/internal/testenv"
)

// pgURL is the database of the run: SEMA_TEST_POSTGRES_URL, else one
// started by testenv. Read once by TestMain: libraries never read the
// environment.
var pgURL = os.Getenv("SEMA_TEST_POSTGRES_URL")

func TestMain(m *testing.M) { testenv.Main(m) }

// database returns the URL of the database of the run.
func database(b *testing.B) string {
	if pgURL == "" {
		pgURL = testenv.SharedPostgres(b).URL()
	}
	return pgURL
}

// contenders is the number of concurrent clients of the contended
// benchmarks.
const contenders = 64

var bg = context.Background()

// runID makes names unique per benchmark run.
func runID() string { return strings.ToLower(rand.Text()[:10]) }

// turns records who got the lock and how long each waited, from the
// (skip+1)th turn on: the turns before are the warm-up, while the
// contenders that arrived at once form the queue and every connection runs
// its first statements.
type turns struct {
	mu       sync.Mutex
	skip     int
	seen     int
	warmMax  time.Duration // the longest wait of the warm-up
	from     time.Time     // when the first recorded turn began
	last     int
	follows  int // recorded turns that followed another
	handoffs int // of those, turns whose previous holder was another worker
	waits    []time.Duration
}

func newTurns(skip int) *turns { return &turns{skip: skip, last: -1} }

// got is called by worker while it holds the hot lock, after waiting w.
func (t *turns) got(worker int, w time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seen++
	switch {
	case t.seen <= t.skip:
		t.last, t.warmMax = worker, max(t.warmMax, w)
		return
	case t.seen == t.skip+1:
		t.from = time.Now().Add(-w)
	}
	if t.last >= 0 {
		t.follows++
		if t.last != worker {
			t.handoffs++
		}
	}
	t.last = worker
	t.waits = append(t.waits, w)
}

// report adds the hot-name metrics of the recorded turns, which ended at
// end.
func (t *turns) report(b *testing.B, end time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.waits)
	if n == 0 {
		return
	}
	elapsed := end.Sub(t.from)
	slices.Sort(t.waits)
	q := func(p float64) float64 { return float64(t.waits[min(n-1, int(p*float64(n)))]) / 1e6 }
	b.ReportMetric(float64(t.handoffs)/elapsed.Seconds(), "handoffs/s")
	b.ReportMetric(float64(n)/elapsed.Seconds(), "acq/s")
	b.ReportMetric(q(0.50), "wait-p50-ms")
	b.ReportMetric(q(0.99), "wait-p99-ms")
	b.ReportMetric(float64(t.waits[n-1])/1e6, "wait-max-ms")
	b.ReportMetric(float64(t.warmMax)/1e6, "warmup-wait-max-ms")
	if t.follows > 0 {
		b.ReportMetric(100*float64(t.follows-t.handoffs)/float64(t.follows), "same-pct")
	}
}

// conns opens n connections of a pool of n, closed with b.
func conns(b *testing.B, n int) *pgxpool.Pool {
	b.Helper()
	cfg, err := pgxpool.ParseConfig(database(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns, cfg.MinConns = int32(n), int32(n)
	p, err := pgxpool.NewWithConfig(bg, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Close)
	// Open them all now, outside the timed part.
	held := make([]*pgxpool.Conn, n)
	for i := range held {
		if held[i], err = p.Acquire(bg); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range held {
		c.Release()
	}
	return p
}

// deadlocks returns the deadlocks PostgreSQL has detected in the database.
// Sessions report theirs when they end or go idle, within a second.
func deadlocks(b *testing.B) int64 {
	b.Helper()
	c, err := pgx.Connect(bg, database(b))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(bg)
	var n int64
	if err := c.QueryRow(bg, "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()").Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// reportDeadlocks reports the deadlocks detected since before. The
// benchmark's sessions have ended: a session reports its counts when it
// ends, which the statistics show within a moment.
func reportDeadlocks(b *testing.B, before int64) {
	n := deadlocks(b)
	for range 10 {
		if n != before {
			break
		}
		time.Sleep(20 * time.Millisecond)
		n = deadlocks(b)
	}
	b.ReportMetric(float64(n-before), "deadlocks")
}
