package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/postgres"
)

// 64 contenders (16 backends × 4 goroutines) take mutexes: all the same
// one, or one of 1,000 at random. The lock order (a name's row first) must
// keep PostgreSQL from ever detecting a deadlock (pg_stat_database) and
// the backends from ever retrying a step (Stats.Conflicts); on the hot
// name, never two holders at once.
func TestContentionWithoutConflicts(t *testing.T) {
	for _, names := range []int{1, 1000} {
		t.Run(fmt.Sprintf("%d names", names), func(t *testing.T) { testContention(t, names) })
	}
}

func testContention(t *testing.T, names int) {
	const backends, each, rounds = 16, 4, 8
	a := admin(t)
	deadlocks := func() int64 {
		var n int64
		if err := a.QueryRow(context.Background(),
			"SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := deadlocks()
	base := uniqueName("contention")
	var bs []*postgres.Backend
	var inside, acquired atomic.Int64
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for range backends {
		b := open(t, shared(t))
		bs = append(bs, b)
		c := sema.New(b, sema.WithLogger(quiet))
		for range each {
			wg.Go(func() {
				for range rounds {
					l, err := c.Mutex(fmt.Sprintf("%s/%d", base, rand.IntN(names))).Acquire(ctx)
					if err != nil {
						t.Errorf("Acquire: %v", err)
						return
					}
					acquired.Add(1)
					if names == 1 && inside.Add(1) != 1 {
						t.Error("two holders of the hot name at once")
					}
					time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
					if names == 1 {
						inside.Add(-1)
					}
					if err := l.Release(ctx); err != nil {
						t.Errorf("Release: %v", err)
					}
				}
			})
		}
	}
	wg.Wait()
	var conflicts int64
	for _, b := range bs {
		_ = b.Close() // ends the sessions: their statistics reach pg_stat_database
		conflicts += b.Stats().Conflicts
	}
	var after int64
	for range 50 { // the counters arrive within a second or so of the sessions' end
		if after = deadlocks(); after != before {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if after != before || conflicts != 0 {
		t.Fatalf("%d deadlocks detected by PostgreSQL, %d steps retried after a conflict; want none", after-before, conflicts)
	}
	t.Logf("%d acquisitions by 64 contenders on %d name(s): 0 deadlocks, 0 conflicts", acquired.Load(), names)
	checkSums(t, shared(t).URL, postgres.DefaultTablePrefix)
}
