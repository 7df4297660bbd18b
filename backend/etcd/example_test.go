package etcd_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/etcd"
)

// A job that must never run twice at once, anywhere in the fleet: a mutex
// on the etcd cluster, with the fencing token to hand to what it writes.
// (It needs a running etcd, so it is compiled, not run.)
func ExampleOpenURL() {
	ctx := context.Background()
	b, err := etcd.OpenURL(ctx, "etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379/locks?dial-timeout=3s")
	if err != nil {
		fmt.Println(err) // wraps sema.ErrUnavailable or sema.ErrPermission
		return
	}
	c := sema.New(b)
	defer c.Close()

	err = c.Do(ctx, "nightly-report", func(ctx context.Context) error {
		// ctx ends if the lease is lost (before etcd could give it to
		// anyone else).
		return nil
	}, sema.WithTTL(30*time.Second))
	fmt.Println(err)
}

// A semaphore of 4 permits shared by every process of the fleet; a large
// job takes 2 of them. Waiters are served in arrival order.
func ExampleOpen() {
	ctx := context.Background()
	b, err := etcd.Open(ctx, etcd.Config{
		Endpoints: []string{"10.0.0.1:2379", "10.0.0.2:2379", "10.0.0.3:2379"},
		Prefix:    "locks",
		Username:  "sema",
		Password:  "secret",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	c := sema.New(b)
	defer c.Close()
	l, err := c.Semaphore("db-migrations", 4).Acquire(ctx, sema.WithWeight(2))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Release(ctx)
	fmt.Println("token", l.Token())
}
