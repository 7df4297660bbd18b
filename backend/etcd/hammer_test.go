package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/testenv"
)

// TestHammerMixed runs goroutines of several backends (as several
// processes would) on one semaphore with random weights and random
// cancellations: waiters of one backend are woken in-process, the others
// by etcd watches, and the weights held never exceed the limit.
func TestHammerMixed(t *testing.T) {
	c := testenv.SharedEtcd(t)
	for _, limit := range []int64{1, 3} {
		t.Run(fmt.Sprintf("limit%d", limit), func(t *testing.T) {
			name := fmt.Sprintf("hammer/%d/%d", limit, time.Now().UnixNano())
			const backends, workers, iters = 3, 6, 30
			var held atomic.Int64
			var granted, cancelled atomic.Int64
			var wg sync.WaitGroup
			for range backends {
				cl := sema.New(open(t, c, ""))
				t.Cleanup(func() { _ = cl.Close() })
				for range workers {
					wg.Go(func() {
						s := cl.Semaphore(name, limit)
						for range iters {
							w := rand.Int64N(limit) + 1
							ctx, cancel := context.WithTimeout(context.Background(), time.Duration(5+rand.IntN(200))*time.Millisecond)
							l, err := s.Acquire(ctx, sema.WithWeight(w))
							cancel()
							if err != nil {
								if !errors.Is(err, sema.ErrNotAcquired) {
									t.Errorf("Acquire: %v", err)
									return
								}
								cancelled.Add(1)
								continue
							}
							granted.Add(1)
							use(t, l, &held, 2*time.Millisecond)
						}
					})
				}
			}
			wg.Wait()
			t.Logf("granted %d, cancelled %d", granted.Load(), cancelled.Load())
			if granted.Load() == 0 {
				t.Fatal("nothing was granted")
			}
			// Nothing leaked: the whole limit is free.
			cl := sema.New(open(t, c, ""))
			defer cl.Close()
			l, err := cl.Semaphore(name, limit).TryAcquire(context.Background(), sema.WithWeight(limit))
			if err != nil {
				t.Fatalf("whole limit not free after the hammer: %v", err)
			}
			_ = l.Release(context.Background())
		})
	}
}

// use holds lease l for up to d, counting its weight in held, which must
// never exceed the limit, then releases it.
func use(t *testing.T, l *sema.Lease, held *atomic.Int64, d time.Duration) {
	if n := held.Add(l.Weight()); n > l.Limit() {
		t.Errorf("%d permits held, limit %d", n, l.Limit())
	}
	time.Sleep(time.Duration(rand.Int64N(int64(d))))
	held.Add(-l.Weight())
	if err := l.Release(context.Background()); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// TestHammerTryAndWait mixes TryAcquire and Acquire of two backends with
// random weights: a request that waits learns the entry ahead of it from
// the queue's tail, which a TryAcquire updates too.
func TestHammerTryAndWait(t *testing.T) {
	c := testenv.SharedEtcd(t)
	const limit = 3
	name := fmt.Sprintf("hammer/try/%d", time.Now().UnixNano())
	var held atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		cl := sema.New(open(t, c, ""))
		t.Cleanup(func() { _ = cl.Close() })
		for i := range 6 {
			wg.Go(func() {
				s := cl.Semaphore(name, limit)
				for range 40 {
					w := rand.Int64N(limit) + 1
					var l *sema.Lease
					var err error
					if i%2 == 0 {
						l, err = s.TryAcquire(context.Background(), sema.WithWeight(w))
					} else {
						ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
						l, err = s.Acquire(ctx, sema.WithWeight(w))
						cancel()
					}
					if errors.Is(err, sema.ErrNotAcquired) {
						time.Sleep(time.Duration(rand.IntN(1000)) * time.Microsecond)
						continue
					}
					if err != nil {
						t.Errorf("acquire: %v", err)
						return
					}
					use(t, l, &held, 1500*time.Microsecond)
				}
			})
		}
	}
	wg.Wait()
}

// A waiter learns the entry just ahead of it from the queue's tail: an
// entry put by TryAcquire (of another process) must be that entry, or the
// waiter would count only what is ahead of an older one.
func TestTailAfterTryAcquire(t *testing.T) {
	c := testenv.SharedEtcd(t)
	ctx := context.Background()
	name := fmt.Sprintf("tail/%d", time.Now().UnixNano())
	a, b := sema.New(open(t, c, "")), sema.New(open(t, c, ""))
	defer a.Close()
	defer b.Close()
	x, err := a.Semaphore(name, 3).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := b.Semaphore(name, 3).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if y, err := a.Semaphore(name, 3).Acquire(short, sema.WithWeight(2)); err == nil {
		t.Fatalf("weight 2 granted beside two holders of weight 1 (limit 3), token %d", y.Token())
	}
	_ = tr.Release(ctx)
	_ = x.Release(ctx)
}
