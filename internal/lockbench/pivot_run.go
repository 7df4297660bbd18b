package lockbench

import (
	"context"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"path/filepath"
	"sync"
	"time"

	"github.com/sema-dev/sema"
)

// pivotLocker takes the lock guarding one data file: key is a server index,
// or -1 for the global file. It returns how long it waited.
type pivotLocker interface {
	lock(ctx context.Context, key int) (wait time.Duration, unlock func() error, err error)
	close() error
}

// pivotCase is one (servers, lock, layout) configuration: its files and
// lockers are set up once, then it runs in slices, interleaved with the
// other locks' slices so that every lock sees the same host load.
type pivotCase struct {
	o       PivotOptions
	servers int
	lock    string
	layout  string
	dir     string
	lockers []pivotLocker
	shared  *sema.Client // mem:// lives in one process: its workers share it
	waits   []time.Duration
}

// newPivotCase sets up the files and the workers' lockers, and takes every
// lock once.
func newPivotCase(ctx context.Context, o PivotOptions, servers int, lock, layout string) (_ *pivotCase, err error) {
	c := &pivotCase{o: o, servers: servers, lock: lock, layout: layout,
		dir: filepath.Join(o.Dir, fmt.Sprintf("%s-%s-%d", lock, layout, servers))}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	if err := setupPivotFiles(c.dir, servers, layout, o.Payload); err != nil {
		return nil, err
	}
	prefix := "bench-pivot/" + rand.Text()[:8] + "/" // fresh names for every case
	if lock == "sema" && IsMemURL(o.Backend) {
		b, err := o.Open(ctx)
		if err != nil {
			return nil, err
		}
		c.shared = sema.New(b)
	}
	c.lockers = make([]pivotLocker, o.Workers)
	for i := range c.lockers {
		if c.shared != nil {
			c.lockers[i] = &semaLocker{c: c.shared, prefix: prefix, sems: map[int]*sema.Semaphore{}, shared: true}
			continue
		}
		if c.lockers[i], err = newPivotLocker(ctx, lock, o.Open, c.dir, prefix); err != nil {
			return nil, err
		}
	}
	if err := warmUp(ctx, c.lockers[0], servers, layout); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *pivotCase) close() {
	for _, l := range c.lockers {
		if l != nil {
			l.close()
		}
	}
	if c.shared != nil {
		c.shared.Close()
	}
}

// run has the workers update the files for d, adds their waits to c.waits
// and checks that no update was lost.
func (c *pivotCase) run(ctx context.Context, d time.Duration) error {
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	for w := range c.o.Workers {
		wg.Go(func() {
			mine, err := c.work(ctx, w, deadline)
			mu.Lock()
			defer mu.Unlock()
			c.waits = append(c.waits, mine...)
			if err != nil && ctx.Err() == nil {
				first = cmpOr(first, err)
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// The exclusion check: every update is in the files, none lost
	// to a concurrent read-modify-write.
	recorded, err := countUpdates(c.dir, c.servers, c.layout)
	if err != nil {
		return err
	}
	if recorded != len(c.waits) {
		return fmt.Errorf("%w: %d updates made but %d recorded in the files: the lock did not exclude",
			errLostUpdates, len(c.waits), recorded)
	}
	return nil
}

// work is one worker until deadline: it returns the waits of its updates.
func (c *pivotCase) work(ctx context.Context, w int, deadline time.Time) ([]time.Duration, error) {
	rng := mrand.New(mrand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	sleep := func(d time.Duration) bool {
		t.Reset(d)
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	var mine []time.Duration
	if !sleep(time.Duration(rng.Int64N(int64(c.o.Interval) + 1))) { // spread the starts
		return mine, nil
	}
	l := c.lockers[w]
	for time.Now().Before(deadline) {
		srv := rng.IntN(c.servers)
		key := srv
		if c.layout == "global" {
			key = -1
		}
		wait, unlock, err := l.lock(ctx, key)
		if err == nil {
			err = updatePivot(c.dir, c.layout, srv, w)
			if uerr := unlock(); err == nil {
				err = uerr
			}
		}
		if err != nil {
			return mine, err
		}
		mine = append(mine, wait)
		if !sleep(time.Duration(float64(c.o.Interval) * (0.5 + rng.Float64()))) {
			return mine, nil
		}
	}
	return mine, nil
}

// runPivot runs one configuration alone for o.Duration.
func runPivot(ctx context.Context, o PivotOptions, servers int, lock, layout string) (pivotResult, error) {
	c, err := newPivotCase(ctx, o, servers, lock, layout)
	if err != nil {
		return pivotResult{}, err
	}
	defer c.close()
	if err := c.run(ctx, o.Duration); err != nil {
		return pivotResult{}, err
	}
	return summarize(c.waits), nil
}

// warmUp takes and releases every lock once, so that the runs measure the
// steady state of an installation whose lock files exist.
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
