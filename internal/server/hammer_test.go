package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sema-dev/sema/internal/testenv"
	"github.com/sema-dev/sema/internal/wire"
)

// grantRec is one lease as a client saw it: from when the grant arrived
// to when the client first sent its release. The server held the lease
// over at least that interval, so if the server never had more than limit
// live leases, these intervals never overlap more than limit deep.
type grantRec struct {
	client     int
	token      uint64
	start, end time.Time
}

// retry calls op until it answers 200 (true), retrying while the server
// is down; another answer goes to bad (false), with ambiguous set if an
// earlier attempt may have reached the server.
func retry(op func() (int, *wire.Error, error), bad func(code int, e *wire.Error, ambiguous bool)) bool {
	ambiguous := false
	for {
		code, e, err := op()
		switch {
		case err == nil && code == 200:
			return true
		case err == nil && code != 503:
			bad(code, e, ambiguous)
			return false
		case err != nil && !errors.Is(err, syscall.ECONNREFUSED):
			ambiguous = true
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// validUntil is end, or the latest instant a lease acquired by a request
// sent at sent could still be valid if that is earlier.
func validUntil(end, sent time.Time, ttl time.Duration) time.Time {
	if limit := sent.Add(ttl); limit.Before(end) {
		return limit
	}
	return end
}

// TestHammerKill9 runs clients acquiring and releasing a limit-2
// semaphore while the server is killed with SIGKILL and restarted on the
// same data directory, several times. No token may repeat or go back, and
// no more than two leases may ever be live, by the clients' records and by
// the server's own describe. A lease may be lost only across a crash (a
// handoff answered before its fsync, behind the name's recovery fence);
// without a crash in between, renew and release must work.
func TestHammerKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes, a few seconds")
	}
	const (
		clients  = 6
		limit    = 2
		restarts = 4
		name     = "hammer"
		ttl      = time.Second
	)
	var url atomic.Value
	// A tiny snapshot threshold: the log is rotated and truncated many
	// times, so kills also land during snapshots.
	p := testenv.StartSema(t, testenv.SemaOptions{Args: []string{"--snapshot-bytes", "8192"}})
	url.Store(p.URL)

	var stop atomic.Bool
	var gen atomic.Int64 // restarts so far
	var lost atomic.Int64
	var expired atomic.Int64 // leases this process held past their TTL (a stalled machine)
	var mu sync.Mutex
	var recs []grantRec
	var failures []string
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for cl := range clients {
		wg.Go(func() {
			c := &http.Client{Timeout: 5 * time.Second}
			var last uint64
			for n := 0; !stop.Load(); n++ {
				id := fmt.Sprintf("c%d-%d", cl, n)
				var lease *wire.Lease
				var g0 int64 // restarts before the acquire that granted lease
				var sent time.Time
				for lease == nil && !stop.Load() {
					g0 = gen.Load()
					sent = time.Now()
					code, env, err := call(c, "POST", url.Load().(string)+wire.PathAcquire,
						wire.AcquireRequest{Name: name, Limit: limit, ID: id, TTLMillis: ttl.Milliseconds(), WaitMillis: 1000})
					switch {
					case err != nil || code == 503:
						time.Sleep(5 * time.Millisecond) // server down: retry the same id
					case env.Lease != nil:
						lease = env.Lease
					case env.Error != nil && env.Error.Code == wire.CodeNotAcquired:
					default:
						fail("client %d acquire: %d %+v", cl, code, env.Error)
						return
					}
				}
				if lease == nil {
					return
				}
				start := time.Now()
				if lease.Token <= last {
					fail("client %d: token %d after %d", cl, lease.Token, last)
				}
				last = lease.Token
				if n%8 == 0 {
					// A long hold, likely across a restart, renewed midway.
					time.Sleep(time.Duration(10+n%40) * time.Millisecond)
					if !retry(func() (int, *wire.Error, error) {
						code, env, err := call(c, "POST", url.Load().(string)+wire.PathRenew,
							wire.RenewRequest{Name: name, ID: id, TTLMillis: ttl.Milliseconds()})
						return code, env.Error, err
					}, func(code int, e *wire.Error, ambiguous bool) {
						if code == 410 && gen.Load() != g0 {
							lost.Add(1)
							return
						}
						if code == 410 && time.Since(sent) >= ttl {
							expired.Add(1) // this process stalled past the TTL
							return
						}
						fail("client %d renew of token %d: %d %+v", cl, lease.Token, code, e)
					}) {
						mu.Lock()
						recs = append(recs, grantRec{client: cl, token: lease.Token, start: start, end: validUntil(time.Now(), sent, ttl)})
						mu.Unlock()
						continue
					}
					time.Sleep(time.Duration(10+n%40) * time.Millisecond)
				} else {
					time.Sleep(time.Duration(n%3) * time.Millisecond)
				}
				end := time.Now()
				retry(func() (int, *wire.Error, error) {
					code, env, err := call(c, "POST", url.Load().(string)+wire.PathRelease, wire.ReleaseRequest{Name: name, ID: id})
					return code, env.Error, err
				}, func(code int, e *wire.Error, ambiguous bool) {
					if code == 404 && ambiguous {
						return // an earlier attempt reached the server; its answer was lost in the crash
					}
					if code == 404 && gen.Load() != g0 {
						lost.Add(1)
						return
					}
					if code == 404 && time.Since(sent) >= ttl {
						expired.Add(1) // this process stalled past the TTL
						return
					}
					fail("client %d release of token %d: %d %+v", cl, lease.Token, code, e)
				})
				mu.Lock()
				recs = append(recs, grantRec{client: cl, token: lease.Token, start: start, end: validUntil(end, sent, ttl)})
				mu.Unlock()
			}
		})
	}
	// The server's own view, polled throughout.
	wg.Go(func() {
		c := &http.Client{Timeout: 5 * time.Second}
		for !stop.Load() {
			st, err := getStatus(c, url.Load().(string), name)
			leases := 0
			for _, h := range st.Holders {
				if h.Token != 0 { // token 0: the recovery fence, not a lease
					leases++
				}
			}
			if err == nil && (st.Used > limit || leases > limit) {
				fail("server describes %d holders using %d of %d", leases, st.Used, limit)
			}
			time.Sleep(3 * time.Millisecond)
		}
	})

	counts := []int{}
	countGrants := func() int { mu.Lock(); defer mu.Unlock(); return len(recs) }
	failed := func() bool { mu.Lock(); defer mu.Unlock(); return len(failures) > 0 }
	// 150 grants after each restart: the server grants again.
	for round := 0; round <= restarts && !failed(); round++ {
		if round > 0 {
			gen.Add(1)
			p.Restart(t, true)
		}
		before := countGrants()
		testenv.WaitFor(t, fmt.Sprintf("150 grants after restart %d", round), func() bool {
			return countGrants() >= before+150 || failed()
		})
		counts = append(counts, countGrants()-before)
	}
	stop.Store(true)
	wg.Wait()
	p.Shutdown(t)

	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("grants between restarts: %v (total %d); leases lost across a crash: %d; held past their TTL by a stalled client: %d",
		counts, len(recs), lost.Load(), expired.Load())
	seen := map[uint64]bool{}
	type ev struct {
		at    time.Time
		delta int
	}
	var evs []ev
	for _, r := range recs {
		if seen[r.token] {
			t.Errorf("token %d granted twice", r.token)
		}
		seen[r.token] = true
		evs = append(evs, ev{r.start, +1}, ev{r.end, -1})
	}
	slices.SortFunc(evs, func(a, b ev) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // ends before starts at the same instant
	})
	live, peak := 0, 0
	for _, e := range evs {
		live += e.delta
		peak = max(peak, live)
	}
	if peak > limit {
		t.Errorf("clients saw %d leases live at once; limit %d", peak, limit)
	}
}
