package testenv

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// RedisCluster is a Redis Cluster of three masters (no replicas) on
// 127.0.0.1, with all 16384 slots assigned.
type RedisCluster struct {
	Nodes []*Redis
}

// Addrs returns the nodes' host:port, for go-redis's ClusterOptions.
func (c *RedisCluster) Addrs() []string {
	a := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		a[i] = n.Addr
	}
	return a
}

// URL returns a redis:// URL naming every node as addr parameters
// (redis://first?addr=second&addr=third), the form go-redis's
// ParseClusterURL reads.
func (c *RedisCluster) URL() string {
	u := "redis://" + c.Nodes[0].Addr
	for i, n := range c.Nodes[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + n.Addr
	}
	return u
}

// StartRedisCluster starts a three-master cluster of its own for the
// calling test; it is stopped when the test ends.
func StartRedisCluster(tb testing.TB) *RedisCluster {
	tb.Helper()
	c := startRedisCluster(tb)
	tb.Cleanup(c.stop)
	return c
}

func startRedisCluster(tb testing.TB) *RedisCluster {
	tb.Helper()
	cli := lookBin(tb, "redis-cli", "redis-tools")
	c := &RedisCluster{}
	for range 3 {
		c.Nodes = append(c.Nodes, startRedis(tb, RedisOptions{}, true))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if err := run(nil, c.Nodes[0].Dir, cli, args...); err != nil {
		c.stop()
		tb.Fatalf("testenv: creating the redis cluster: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range c.Nodes {
		for {
			info, err := redisDoAll(n.Addr, "CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				c.stop()
				tb.Fatalf("testenv: redis cluster node %s not ok after 30 s (%v): %s", n.Addr, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c
}

func (c *RedisCluster) stop() {
	for _, n := range c.Nodes {
		n.Stop(0)
		removeAll(n.Dir)
	}
}

// redisDoAll is redisDo for a command whose answer is one bulk string.
func redisDoAll(addr string, args ...string) (string, error) {
	s, err := redisDo(addr, args...)
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(s, "-") {
		return "", fmt.Errorf("%s", s)
	}
	return s, nil
}
