package sema_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/mem"
)

// A mutex guards a job: one holder at a time, with a fencing token to hand
// to the resource it writes.
func Example() {
	ctx := context.Background()
	c := sema.New(mem.New())
	defer c.Close()

	lease, err := c.Mutex("nightly-report").Acquire(ctx, sema.WithTTL(30*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("holding", lease.Name(), "token", lease.Token())
	if err := lease.Release(ctx); err != nil {
		fmt.Println(err)
	}
	// Output: holding nightly-report token 1
}

// A counting semaphore lets at most 3 workers call a fragile API at once.
func ExampleClient_Semaphore() {
	ctx := context.Background()
	c := sema.New(mem.New())
	defer c.Close()
	api := c.Semaphore("fragile-api", 3)

	var mu sync.Mutex
	inside, most := 0, 0
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			_ = api.Do(ctx, func(context.Context) error {
				mu.Lock()
				inside++
				most = max(most, inside)
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				inside--
				mu.Unlock()
				return nil
			})
		})
	}
	wg.Wait()
	fmt.Println("at most", most, "at once")
	// Output: at most 3 at once
}

// TryAcquire never waits; the error says who holds the name.
func ExampleSemaphore_TryAcquire() {
	ctx := context.Background()
	c := sema.New(mem.New())
	defer c.Close()

	first, _ := c.Mutex("deploy").Acquire(ctx, sema.WithOwner("alice"))
	defer first.Release(ctx)

	_, err := c.Mutex("deploy").TryAcquire(ctx, sema.WithOwner("bob"))
	var held *sema.HeldError
	if errors.As(err, &held) {
		fmt.Println("held by", held.Holders[0].Owner)
	}
	fmt.Println(errors.Is(err, sema.ErrNotAcquired))
	// Output:
	// held by alice
	// true
}

// Do runs a function under the lock; its context ends if the lease is lost.
func ExampleClient_Do() {
	ctx := context.Background()
	c := sema.New(mem.New())
	defer c.Close()

	err := c.Do(ctx, "migrate", func(ctx context.Context) error {
		fmt.Println("migrating")
		return ctx.Err() // stop work when the lease's context ends
	})
	fmt.Println(err)
	// Output:
	// migrating
	// <nil>
}

// A lease's Done channel closes when it is lost: stop working then.
func ExampleLease_Done() {
	ctx := context.Background()
	c := sema.New(mem.New())
	defer c.Close()

	lease, _ := c.Mutex("leader").Acquire(ctx, sema.WithTTL(time.Second), sema.WithoutKeepalive())
	<-lease.Done() // no keepalive: the local deadline ends it before the TTL
	fmt.Println(errors.Is(lease.Err(), sema.ErrLeaseLost), errors.Is(lease.Err(), sema.ErrExpired))
	// Output: true true
}

// Weighted acquisitions take several permits at once.
func ExampleWithWeight() {
	ctx := context.Background()
	c := sema.New(mem.New())
	defer c.Close()
	pool := c.Semaphore("connections", 10)

	big, _ := pool.Acquire(ctx, sema.WithWeight(8))
	_, err := pool.TryAcquire(ctx, sema.WithWeight(3))
	fmt.Println(errors.Is(err, sema.ErrNotAcquired))
	_ = big.Release(ctx)
	small, err := pool.TryAcquire(ctx, sema.WithWeight(3))
	fmt.Println(err, small.Weight())
	// Output:
	// true
	// <nil> 3
}

// Describe shows holders and waiters.
func ExampleClient_Describe() {
	ctx := context.Background()
	c := sema.New(mem.New())
	defer c.Close()

	l, _ := c.Semaphore("workers", 4).Acquire(ctx, sema.WithOwner("w1"), sema.WithWeight(2))
	defer l.Release(ctx)
	st, _ := c.Describe(ctx, "workers")
	fmt.Printf("%s %d/%d held by %s\n", st.Name, st.Used, st.Limit, st.Holders[0].Owner)
	// Output: workers 2/4 held by w1
}

// Open takes a backend URL; the backend's package registers its scheme
// (here backend/mem, imported above, registers mem://). A URL without a
// scheme is refused with the one probably meant.
func ExampleOpen() {
	ctx := context.Background()
	b, err := sema.Open(ctx, "mem://")
	if err != nil {
		fmt.Println(err)
		return
	}
	c := sema.New(b)
	defer c.Close()
	l, err := c.Mutex("job").Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("token", l.Token())
	l.Release(ctx)

	_, err = sema.Open(ctx, "localhost:7543")
	fmt.Println(err)
	// Output:
	// token 1
	// sema: invalid argument: backend URL "localhost:7543" has no scheme: for a sema server write http://localhost:7543
}
