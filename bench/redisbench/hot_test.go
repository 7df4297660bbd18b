package redisbench

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"

	"github.com/sema-dev/sema"
)

// BenchmarkHotName: 64 contenders, each with its own client, take turns on
// one lock and hold it for no time.
func BenchmarkHotName(b *testing.B) {
	compare(b,
		system{"sema", func(b *testing.B) {
			name := "bench/hot/" + b.Name()
			mus := make([]*sema.Semaphore, contenders)
			for i := range mus {
				mus[i] = newSema(b, 1).Mutex(name, sema.WithTTL(ttl))
			}
			hot(b, func(w int) (func() error, error) {
				l, err := mus[w].Acquire(bg)
				if err != nil {
					return nil, err
				}
				return func() error { return l.Release(bg) }, nil
			})
		}},
		system{"redislock", func(b *testing.B) {
			key := "bench:hot:redislock"
			lockers := make([]*redislock.Client, contenders)
			for i := range lockers {
				lockers[i] = newRedislock(b, 1)
			}
			hot(b, func(w int) (func() error, error) {
				l, err := lockers[w].Obtain(bg, key, ttl, redislockWait)
				if err != nil {
					return nil, err
				}
				return func() error { return l.Release(bg) }, nil
			})
		}},
		system{"redsync", func(b *testing.B) {
			mus := make([]*redsync.Mutex, contenders)
			for i := range mus {
				mus[i] = redsyncMutex(newRedsync(b, 1), "bench:hot:redsync")
			}
			hot(b, func(w int) (func() error, error) {
				if err := mus[w].LockContext(bg); err != nil {
					return nil, err
				}
				return func() error {
					ok, err := mus[w].UnlockContext(bg)
					if err == nil && !ok {
						err = errors.New("redsync: unlock found the lock taken")
					}
					return err
				}, nil
			})
		}},
	)
}

// The hot-name run: the contenders first take turns for hotWarmup (clients
// connect, sema subscribes), then for hotMeasure, when every turn is
// recorded. A contender still waiting at the end finishes its wait, which
// counts, and stops.
const (
	hotWarmup  = 500 * time.Millisecond
	hotMeasure = 3 * time.Second
)

// hot drives the contenders: each acquires (timing the wait), records the
// turn, and releases at once. It ignores b.N: one run is one measurement.
func hot(b *testing.B, acquire func(worker int) (release func() error, err error)) {
	t := newTurns()
	start := time.Now()
	from, until := start.Add(hotWarmup), start.Add(hotWarmup+hotMeasure)
	var wg sync.WaitGroup
	errs := make(chan error, contenders+1)
	b.ResetTimer()
	wg.Go(func() { // the server's CPU time when measuring begins
		time.Sleep(time.Until(from))
		c, err := redisCPU(server(b).Addr)
		if err != nil {
			errs <- err
		}
		t.mu.Lock()
		t.cpu0 = c
		t.mu.Unlock()
	})
	for w := range contenders {
		wg.Go(func() {
			for {
				began := time.Now()
				if began.After(until) {
					return
				}
				release, err := acquire(w)
				if err != nil {
					errs <- err
					return
				}
				if !began.Before(from) {
					t.held(w, time.Since(began))
				}
				if err := release(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	t.report(b, hotMeasure)
}
