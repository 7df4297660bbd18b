package cli

import (
	"context"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/sema-dev/sema"
)

// pivotResult is the lock-wait distribution of one run.
type pivotResult struct {
	n             int
	avg, p99, max time.Duration
}

// pivotLocker takes the lock guarding one data file: key is a server index,
// or -1 for the global file. It returns how long it waited.
type pivotLocker interface {
	lock(ctx context.Context, key int) (wait time.Duration, unlock func() error, err error)
	close() error
}

// runPivot runs one (servers, lock, layout) configuration.
func runPivot(ctx context.Context, o pivotOptions, servers int, lock, layout string) (pivotResult, error) {
	dir := filepath.Join(o.dir, fmt.Sprintf("%s-%s-%d", lock, layout, servers))
	if err := setupPivotFiles(dir, servers, layout, o.payload); err != nil {
		return pivotResult{}, err
	}
	prefix := "bench-pivot/" + rand.Text()[:8] + "/" // fresh names for every run
	lockers := make([]pivotLocker, o.workers)
	defer func() {
		for _, l := range lockers {
			if l != nil {
				l.close()
			}
		}
	}()
	var shared *sema.Client // mem:// lives in one process: share it
	if lock == "sema" && isMemURL(o.backend) {
		b, err := openBackend(ctx, o.backend, o.getenv)
		if err != nil {
			return pivotResult{}, err
		}
		shared = sema.New(b)
		defer shared.Close()
	}
	for i := range lockers {
		if shared != nil {
			lockers[i] = &semaLocker{c: shared, prefix: prefix, sems: map[int]*sema.Semaphore{}, shared: true}
			continue
		}
		var err error
		if lockers[i], err = newPivotLocker(ctx, lock, o.backend, dir, prefix, o.getenv); err != nil {
			return pivotResult{}, err
		}
	}
	if err := warmUp(ctx, lockers[0], servers, layout); err != nil {
		return pivotResult{}, err
	}
	var (
		mu    sync.Mutex
		waits []time.Duration
		first error
		wg    sync.WaitGroup
	)
	deadline := time.Now().Add(o.duration)
	for w := range o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := mrand.New(mrand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			sleep := func(d time.Duration) bool {
				t := time.NewTimer(d)
				defer t.Stop()
				select {
				case <-ctx.Done():
					return false
				case <-t.C:
					return true
				}
			}
			if !sleep(time.Duration(rng.Int64N(int64(o.interval) + 1))) { // spread the starts
				return
			}
			var mine []time.Duration
			defer func() { mu.Lock(); waits = append(waits, mine...); mu.Unlock() }()
			for time.Now().Before(deadline) {
				srv := rng.IntN(servers)
				key := srv
				if layout == "global" {
					key = -1
				}
				wait, unlock, err := lockers[w].lock(ctx, key)
				if err == nil {
					err = updatePivot(dir, layout, srv, w)
					if uerr := unlock(); err == nil {
						err = uerr
					}
				}
				if err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						first = cmpOr(first, err)
						mu.Unlock()
					}
					return
				}
				mine = append(mine, wait)
				if !sleep(time.Duration(float64(o.interval) * (0.5 + rng.Float64()))) {
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return pivotResult{}, first
	}
	// The seed's exclusion check: every update is in the files, none lost
	// to a concurrent read-modify-write.
	recorded, err := countUpdates(dir, servers, layout)
	if err != nil {
		return pivotResult{}, err
	}
	if recorded != len(waits) {
		return pivotResult{}, fmt.Errorf("%w: %d updates made but %d recorded in the files: the lock did not exclude",
			errLostUpdates, len(waits), recorded)
	}
	return summarize(waits), nil
}

// warmUp takes and releases every lock once, so that the runs measure the
// steady state of an installation whose lock files exist, as the seed did.
func warmUp(ctx context.Context, l pivotLocker, servers int, layout string) error {
	keys := []int{-1}
	if layout == "sharded" {
		keys = keys[:0]
		for i := range servers {
			keys = append(keys, i)
		}
	}
	for _, k := range keys {
		_, unlock, err := l.lock(ctx, k)
		if err != nil {
			return err
		}
		if err := unlock(); err != nil {
			return err
		}
	}
	return nil
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func summarize(ws []time.Duration) pivotResult {
	if len(ws) == 0 {
		return pivotResult{}
	}
	slices.Sort(ws)
	var sum time.Duration
	for _, w := range ws {
		sum += w
	}
	i := (len(ws)*99+99)/100 - 1 // nearest-rank p99
	return pivotResult{n: len(ws), avg: sum / time.Duration(len(ws)), p99: ws[i], max: ws[len(ws)-1]}
}
