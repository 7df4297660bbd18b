package remote_test

import (
	"context"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/remote"
	"github.com/sema-dev/sema/internal/testenv"
)

// holding is one grant as a client saw it.
type holding struct {
	token    uint64
	id       string
	sent     time.Time // the acquire was sent
	granted  time.Time // the grant arrived
	end      time.Time // the client stopped relying on it (release called, or the lease's context ended)
	lostLive bool      // the lease ended before the client released it
}

// TestKillRestartUnderLoad: many clients hammer a limit-2 semaphore while
// the server is killed with SIGKILL and restarted on the same data
// directory, twice. By the clients' clocks, no instant has more than 2
// holders, and tokens only go up: a grant that arrived before another was
// asked for has the smaller token.
func TestKillRestartUnderLoad(t *testing.T) {
	const (
		clients = 12
		limit   = 2
		ttl     = time.Second
		name    = "crash/hammer"
	)
	srv := startServer(t)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	var (
		mu       sync.Mutex
		holdings []holding
		errs     atomic.Int64
		wg       sync.WaitGroup
	)
	for i := 0; i < clients; i++ {
		b, err := remote.New(remote.Config{URL: srv.URL, RequestTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		c := sema.New(b, sema.WithReleaseTimeout(2*time.Second))
		defer c.Close()
		sem := c.Semaphore(name, limit, sema.WithTTL(ttl))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				h := holding{sent: time.Now()}
				l, err := sem.Acquire(ctx)
				if err != nil {
					if ctx.Err() == nil {
						errs.Add(1)
						time.Sleep(5 * time.Millisecond)
					}
					continue
				}
				h.granted, h.token, h.id = time.Now(), l.Token(), l.ID()
				doneAt := make(chan time.Time, 1)
				stopAfter := context.AfterFunc(l.Context(), func() { doneAt <- time.Now() })
				select { // hold a little, or until the lease is lost
				case <-time.After(time.Duration(rand.IntN(3000)) * time.Microsecond):
				case <-l.Done():
				}
				h.end = time.Now()
				if !stopAfter() { // the lease had ended before Release
					h.end, h.lostLive = <-doneAt, true
				}
				_ = l.Release(context.Background())
				mu.Lock()
				holdings = append(holdings, h)
				mu.Unlock()
			}
		}()
	}

	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(holdings)
	}
	waitGrants := func(n int) {
		t.Helper()
		deadline := time.Now().Add(testenv.HangGuard)
		for count() < n {
			if time.Now().After(deadline) {
				t.Fatalf("only %d grants, want %d (errors %d)", count(), n, errs.Load())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	var kills []time.Time
	waitGrants(200)
	for round := 0; round < 2; round++ {
		kills = append(kills, time.Now())
		srv.Restart(t, true)
		waitGrants(count() + 200)
	}
	stop()
	wg.Wait()

	checkHoldings(t, holdings, limit)
	for _, k := range kills {
		var before, after int
		for _, h := range holdings {
			if h.granted.Before(k) {
				before++
			} else {
				after++
			}
		}
		if before == 0 || after == 0 {
			t.Fatalf("kill at %v: %d grants before, %d after", k, before, after)
		}
	}
	var lost int
	for _, h := range holdings {
		if h.lostLive {
			lost++
		}
	}
	t.Logf("%d grants, %d lost while held, %d failed acquires, 2 kill -9 restarts", len(holdings), lost, errs.Load())
}

// checkHoldings checks the two safety properties on the clients' records.
func checkHoldings(t *testing.T, hs []holding, limit int) {
	t.Helper()
	// At most limit intervals [granted, end) overlap at any instant.
	type event struct {
		at    time.Time
		delta int
	}
	evs := make([]event, 0, 2*len(hs))
	for _, h := range hs {
		evs = append(evs, event{h.granted, +1}, event{h.end, -1})
	}
	sort.Slice(evs, func(i, j int) bool {
		if !evs[i].at.Equal(evs[j].at) {
			return evs[i].at.Before(evs[j].at)
		}
		return evs[i].delta < evs[j].delta // ends before starts at the same instant
	})
	live := 0
	for _, e := range evs {
		live += e.delta
		if live > limit {
			t.Fatalf("%d holders at %v (limit %d)", live, e.at, limit)
		}
	}
	// Tokens are unique, and a grant that arrived before another was sent
	// has the smaller token.
	seen := make(map[uint64]string, len(hs))
	for _, h := range hs {
		if other, dup := seen[h.token]; dup {
			t.Fatalf("token %d granted twice (leases %s and %s)", h.token, other, h.id)
		}
		seen[h.token] = h.id
	}
	byGranted := append([]holding(nil), hs...)
	sort.Slice(byGranted, func(i, j int) bool { return byGranted[i].granted.Before(byGranted[j].granted) })
	bySent := append([]holding(nil), hs...)
	sort.Slice(bySent, func(i, j int) bool { return bySent[i].sent.Before(bySent[j].sent) })
	var maxTok uint64
	var maxID string
	i := 0
	for _, h := range bySent {
		for i < len(byGranted) && byGranted[i].granted.Before(h.sent) {
			if byGranted[i].token > maxTok {
				maxTok, maxID = byGranted[i].token, byGranted[i].id
			}
			i++
		}
		if h.token <= maxTok {
			t.Fatalf("token went back: lease %s got %d, sent after lease %s had got %d", h.id, h.token, maxID, maxTok)
		}
	}
}
