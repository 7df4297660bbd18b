package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sema-dev/sema"
)

// serverInfo is what New learns about the server (every primary of a
// cluster).
type serverInfo struct {
	durable  bool   // append-only file with an fsync per write
	why      string // why not, or why unknown
	replicas int    // fewest replicas connected to a primary
}

// probe checks every primary in one round trip each: it answers, runs
// Redis 7 or later, is a primary, loads the scripts; and reads whether it
// keeps every write across a restart.
func (b *Backend) probe(ctx context.Context) (serverInfo, error) {
	if b.single != nil {
		return probeNode(ctx, b.single, false)
	}
	var (
		mu  sync.Mutex
		all = serverInfo{durable: true, replicas: 1 << 30}
	)
	err := b.cluster.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error {
		si, err := probeNode(ctx, c, true)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if !si.durable && all.durable {
			all.durable, all.why = false, si.why
		}
		all.replicas = min(all.replicas, si.replicas)
		return nil
	})
	if err != nil {
		return all, wrap("connect", "", err)
	}
	return all, nil
}

func probeNode(ctx context.Context, c *goredis.Client, cluster bool) (serverInfo, error) {
	var si serverInfo
	pipe := c.Pipeline()
	ping := pipe.Ping(ctx)
	info := pipe.Info(ctx, "server", "persistence", "replication", "cluster")
	fsync := pipe.ConfigGet(ctx, "appendfsync")
	sources := scripts().sources
	loads := make([]*goredis.StringCmd, len(sources))
	for i, src := range sources {
		loads[i] = pipe.ScriptLoad(ctx, src)
	}
	_, execErr := pipe.Exec(ctx)
	addr := c.Options().Addr
	if err := ping.Err(); err != nil || ping.Val() != "PONG" {
		// A failed handshake (a wrong password) fails the whole pipeline.
		if err == nil {
			err = execErr
		}
		return si, wrap("connect to "+addr, "", err)
	}
	fields := map[string]string{}
	if err := info.Err(); err == nil {
		for _, line := range strings.Split(info.Val(), "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
				fields[k] = v
			}
		}
	}
	if v := fields["redis_version"]; v != "" {
		if major, _, _ := strings.Cut(v, "."); atoi(major) < 7 {
			return si, fmt.Errorf("redis: %s: %w: runs Redis %s; sema needs 7.0 or later", addr, sema.ErrUnavailable, v)
		}
	}
	switch {
	case !cluster && fields["cluster_enabled"] == "1":
		return si, fmt.Errorf("redis: %s: %w: is a Redis Cluster node: add cluster=true to the URL, or name the other nodes with addr=",
			addr, sema.ErrInvalidArgument)
	case fields["role"] != "" && fields["role"] != "master":
		return si, fmt.Errorf("redis: %s: %w: is a replica; connect to the primary", addr, sema.ErrUnavailable)
	}
	for _, l := range loads {
		if err := l.Err(); err != nil {
			return si, wrap("load scripts on "+addr, "", err)
		}
	}
	si.replicas = atoi(fields["connected_slaves"])
	switch fs, err := fsync.Result(); {
	case err != nil:
		si.why = "CONFIG GET was refused (" + strings.TrimPrefix(err.Error(), "redis: ") + "), so the persistence settings are unknown"
	case fields["aof_enabled"] != "1":
		si.why = "the append-only file is off"
	case fs["appendfsync"] != "always":
		si.why = "appendfsync is " + strconv.Quote(fs["appendfsync"]) + ", not always"
	default:
		si.durable = true
	}
	return si, nil
}

func atoi(s string) int {
	n, _ := strconv.Atoi(strings.TrimSpace(s))
	return n
}

// guarantees says what the backend promises with this server.
func guarantees(cfg Config, si serverInfo, cluster bool) sema.Guarantees {
	g := sema.Guarantees{
		Scope:            sema.ScopeCluster,
		FIFO:             true,
		DurableFencing:   si.durable,
		SurvivesFailover: cfg.WaitReplicas > 0,
		Wakeup:           "pub/sub",
	}
	var notes []string
	if cfg.WaitReplicas > 0 {
		notes = append(notes, fmt.Sprintf("grants and renewals are answered once %d replica(s) acknowledged them (WAIT); a failover keeps them if it promotes one of those replicas", cfg.WaitReplicas))
	} else {
		notes = append(notes, "grants are answered before any replica has them: a failover can lose a grant and let a second holder in (set wait_replicas)")
	}
	if si.durable {
		notes = append(notes, "tokens survive a restart (append-only file, fsync always)")
	} else {
		notes = append(notes, "a restart may lose the token counter ("+si.why+"); tokens then restart from Redis's clock in microseconds, so they still go up unless that clock went back")
	}
	if cluster {
		notes = append(notes, "cluster: a waiter whose process died keeps its place until its queue lease ends")
	}
	g.Notes = strings.Join(notes, "; ") + "."
	return g
}
