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
	keys := b.ks.keys(name)
	if b.cfg.WaitReplicas == 0 {
		v, err := s.Run(ctx, b.rdb, keys, args...).Result()
		return v, 0, err
	}
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
