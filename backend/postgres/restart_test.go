package postgres_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/postgres"
	"github.com/sema-dev/sema/internal/testenv"
)

// grantRecord is one grant as its client saw it.
type grantRecord struct {
	token              uint64
	sent, granted, end time.Time // end: released, or the lease's context ended
	lost               bool      // the lease ended while held
}

// TestDatabaseRestart: clients on separate backends hammer a limit-2
// semaphore while PostgreSQL is restarted (fast shutdown), or killed with
// SIGKILL of the postmaster and restarted (crash recovery), at once or
// after staying down for longer than the leases' TTL. By the clients'
// clocks no instant has more than 2 holders, and tokens never go back: a
// grant asked for after another arrived has a larger token.
func TestDatabaseRestart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		crash bool
		down  time.Duration
	}{
		{"fast shutdown", false, 0},
		{"kill -9", true, 0},
		{"kill -9, down 3s", true, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) { testRestart(t, tc.crash, tc.down) })
	}
}

func testRestart(t *testing.T, crash bool, down time.Duration) {
	const clients, limit = 6, 2
	pg := testenv.StartPostgres(t)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var (
		mu        sync.Mutex
		records   []grantRecord
		fails     int
		wg        sync.WaitGroup
		longSince atomic.Int64 // when client 0 took the long lease it holds (0: none)
	)
	for i := range clients {
		b := open(t, postgres.Config{URL: pg.URL(), Recheck: 200 * time.Millisecond})
		sem := sema.New(b, sema.WithReleaseTimeout(2*time.Second), sema.WithLogger(quiet)).Semaphore("restart/hammer", limit, sema.WithTTL(2*time.Second))
		wg.Go(func() {
			for ctx.Err() == nil {
				r := grantRecord{sent: time.Now()}
				l, err := sem.Acquire(ctx)
				if err != nil {
					if ctx.Err() != nil {
						return // the test is over
					}
					if !errors.Is(err, sema.ErrUnavailable) {
						t.Errorf("Acquire: %v", err)
					}
					mu.Lock()
					fails++
					mu.Unlock()
					time.Sleep(20 * time.Millisecond)
					continue
				}
				r.granted, r.token = time.Now(), l.Token()
				lostAt := make(chan time.Time, 1)
				stopWatch := context.AfterFunc(l.Context(), func() { lostAt <- time.Now() })
				hold := time.Duration(rand.IntN(5000)) * time.Microsecond
				if i == 0 {
					hold = 3 * time.Second // longer than the TTL: renewed, or lost while the database is down
					longSince.Store(time.Now().UnixNano())
				}
				select { // hold a while, or until the lease is lost
				case <-time.After(hold):
				case <-l.Done():
				}
				if i == 0 {
					longSince.Store(0)
				}
				if r.end = time.Now(); !stopWatch() {
					r.end, r.lost = <-lostAt, true // it ended on its own: the client relied on it until then
				}
				_ = l.Release(context.Background())
				mu.Lock()
				records = append(records, r)
				mu.Unlock()
			}
		})
	}
	grants := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(records)
	}
	waitGrants := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); grants() < n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("only %d grants, want %d", grants(), n)
			}
		}
	}
	waitGrants(60)
	// Down for longer than the TTL, from early in client 0's long hold:
	// its lease must end while held (late in the hold, the hold could end
	// first).
	fresh := func() bool {
		since := longSince.Load()
		return since != 0 && time.Since(time.Unix(0, since)) < 300*time.Millisecond
	}
	for deadline := time.Now().Add(30 * time.Second); down > 0 && !fresh(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("client 0 never took its long lease")
		}
	}
	restartAt := time.Now()
	if down > 0 {
		if crash {
			pg.KillAll() // no backend may serve a renewal on after the postmaster died
		} else {
			pg.Stop(syscall.SIGINT)
		}
		time.Sleep(down)
		crash = false // stopped already: Restart only starts it
	}
	pg.Restart(t, crash)
	back := time.Since(restartAt)
	waitGrants(grants() + 60)
	stop()
	wg.Wait()

	checkRecords(t, records, limit)
	checkSums(t, pg.URL(), postgres.DefaultTablePrefix)
	before, lost := 0, 0
	for _, r := range records {
		if r.granted.Before(restartAt) {
			before++
		}
		if r.lost {
			lost++
		}
	}
	if down > 0 && lost == 0 {
		t.Errorf("the database was down for longer than the TTL, yet no lease ended while held")
	}
	t.Logf("%d grants (%d before the restart, %d lost while held), %d failed acquires; the database was back in %v",
		len(records), before, lost, fails, back.Round(time.Millisecond))
}

// checkRecords checks exclusion and token order on the clients' records.
func checkRecords(t *testing.T, rs []grantRecord, limit int) {
	t.Helper()
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, r := range rs {
		edges = append(edges, edge{r.granted, 1}, edge{r.end, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // an end before a start at the same instant
	})
	holders := 0
	for _, e := range edges {
		if holders += e.delta; holders > limit {
			t.Fatalf("%d holders at %v (limit %d)", holders, e.at, limit)
		}
	}
	slices.SortFunc(rs, func(a, b grantRecord) int { return a.granted.Compare(b.granted) })
	for i, r := range rs {
		for _, earlier := range rs[:i] {
			if earlier.granted.Before(r.sent) && earlier.token >= r.token {
				t.Fatalf("token went back: %d granted at %v, then %d asked for at %v", earlier.token, earlier.granted, r.token, r.sent)
			}
			if earlier.token == r.token {
				t.Fatalf("token %d granted twice", r.token)
			}
		}
	}
}
