package redis_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/redis"
)

// Open a backend on a Redis server and hold a lock with it.
func ExampleOpen() {
	ctx := context.Background()
	b, err := redis.Open(ctx, "redis://127.0.0.1:6379/0")
	if err != nil {
		fmt.Println(err)
		return
	}
	c := sema.New(b)
	defer c.Close()
	l, err := c.Mutex("nightly-report").Acquire(ctx, sema.WithTTL(30*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Release(ctx)
	fmt.Println("token", l.Token(), "durable fencing:", c.Guarantees().DurableFencing)
}

// URLs name a server, or a cluster by its nodes, and may ask for
// replication to be waited for.
func ExampleParseURL() {
	cfg, err := redis.ParseURL("redis://10.0.0.1:6379/2?prefix=jobs:&wait_replicas=1&wait_timeout=250ms")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Single.Addr, cfg.Single.DB, cfg.Prefix, cfg.WaitReplicas, cfg.WaitTimeout)

	cfg, _ = redis.ParseURL("redis://10.0.0.1:7000?addr=10.0.0.2:7000&addr=10.0.0.3:7000")
	fmt.Println(cfg.Cluster.Addrs)

	_, err = redis.ParseURL("redis://u:secret@10.0.0.1:6379?recheck=forever")
	fmt.Println(err)
	// Output:
	// 10.0.0.1:6379 2 jobs: 1 250ms
	// [10.0.0.1:7000 10.0.0.2:7000 10.0.0.3:7000]
	// sema: invalid argument: redis: url "redis://u:xxxxx@10.0.0.1:6379?recheck=forever": bad recheck "forever"
}
