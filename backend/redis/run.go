package redis

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sema-dev/sema"
)

// run runs a script on name's keys. With Config.WaitReplicas set, a WAIT
// follows the script on the same connection, in the same round trip, and
// run returns how many replicas acknowledged the script's writes; without,
// it returns 0 acknowledgements, which is all that is asked.
func (b *Backend) run(ctx context.Context, s *goredis.Script, name string, args ...any) (any, int64, error) {
	if b.cfg.WaitReplicas == 0 {
		v, err := b.script(ctx, s, name, args...)
		return v, 0, err
	}
	keys := b.ks.keys(name)
	node := b.single
	if b.cluster != nil {
		var err error
		if node, err = b.cluster.MasterForKey(ctx, keys[0]); err != nil {
			return nil, 0, err
		}
	}
	for attempt := 0; ; attempt++ {
		pipe := node.Pipeline()
		ev := s.EvalSha(ctx, pipe, keys, args...)
		wait := pipe.Do(ctx, "wait", b.cfg.WaitReplicas, b.cfg.WaitTimeout.Milliseconds())
		_, _ = pipe.Exec(ctx)
		if err := ev.Err(); err != nil {
			if attempt == 0 && goredis.HasErrorPrefix(err, "NOSCRIPT") {
				if err := s.Load(ctx, node).Err(); err != nil {
					return nil, 0, err
				}
				continue
			}
			return nil, 0, err
		}
		acks, err := wait.Int64()
		if err != nil {
			// The script ran; only its replication is unknown.
			return ev.Val(), 0, nil
		}
		return ev.Val(), acks, nil
	}
}

// script runs a script on name's keys. A call that is the only one in
// flight goes out at once on a connection of the pool: one round trip, no
// hand-off between goroutines. Calls made while others are in flight go
// through go-redis's autopipeliner, which writes the calls that meet in one
// write and reads their answers in one read: with 64 goroutines on
// distinct names that is a third of the client's CPU per call and more
// acquire/release pairs per second (bench/redisbench, BenchmarkDistinct).
func (b *Backend) script(ctx context.Context, s *goredis.Script, name string, args ...any) (any, error) {
	keys := b.ks.keys(name)
	var c goredis.Scripter = b.rdb
	if b.inflight.Add(1) > 1 {
		if ap := b.pipeliner(); ap != nil {
			c = ap
		}
	}
	v, err := s.Run(ctx, c, keys, args...).Result()
	b.inflight.Add(-1)
	return v, err
}

// pipeliner returns the client's autopipeliner, made on first use (it
// runs goroutines of its own until the client is closed), or nil if go-redis
// cannot make one.
func (b *Backend) pipeliner() *goredis.AutoPipeliner {
	b.apOnce.Do(func() {
		var err error
		if b.single != nil {
			b.ap, err = b.single.AutoPipeline()
		} else {
			b.ap, err = b.cluster.AutoPipeline()
		}
		if err != nil {
			b.cfg.Logger.Debug("sema: redis: no autopipelining", "err", err)
			b.ap = nil
		}
	})
	return b.ap
}

// unreplicated gives back a grant too few replicas acknowledged, and says
// so: a failover could lose it, so it is not handed out.
func (b *Backend) unreplicated(name, id string, acks int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.WaitTimeout+time.Second)
	defer cancel()
	err := b.release(ctx, name, id)
	if err != nil {
		b.cfg.Logger.Warn("sema: redis: giving back an unreplicated grant failed; it stays until its TTL",
			"name", name, "lease", id, "err", err)
	}
	return fmt.Errorf("redis: acquire %q: %w: %d of %d replicas acknowledged the grant within %v; it was given back",
		name, sema.ErrUnavailable, acks, b.cfg.WaitReplicas, b.cfg.WaitTimeout)
}
