package testenv

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// StartRedisReplica starts a redis-server of its own that replicates
// primary, and waits until the replication link is up and the replica has
// caught up (the primary lists it online); it is stopped when the test ends. opt tunes it as StartRedis.
func StartRedisReplica(tb testing.TB, primary *Redis, opt RedisOptions) *Redis {
	tb.Helper()
	// Start the first sync at once (Redis 7 waits 5 s for more replicas).
	if s, err := primary.Do("CONFIG", "SET", "repl-diskless-sync-delay", "0"); err != nil || s != "+OK" {
		tb.Fatalf("testenv: CONFIG SET on %s: %q, %v", primary.Addr, s, err)
	}
	host, port, _ := strings.Cut(primary.Addr, ":")
	opt.Args = append(append([]string(nil), opt.Args...), "--replicaof", host, port)
	r := startRedis(tb, opt, false)
	tb.Cleanup(func() { r.Stop(0); removeAll(r.Dir) })
	_, myPort, _ := strings.Cut(r.Addr, ":")
	online := func() error {
		info, err := redisDoAll(primary.Addr, "INFO", "replication")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(info, "\n") {
			if strings.Contains(line, "port="+myPort+",") && strings.Contains(line, "state=online") {
				return nil
			}
		}
		return fmt.Errorf("the primary does not list the replica as online")
	}
	if err := r.waitReady(online); err != nil {
		tb.Fatalf("testenv: replica %s of %s: %v", r.Addr, primary.Addr, err)
	}
	// Online is not yet acknowledging: after a sync the primary streams
	// writes from the replica's first acknowledgement (within a second).
	if err := waitAck(primary.Addr); err != nil {
		tb.Fatalf("testenv: replica %s of %s: %v", r.Addr, primary.Addr, err)
	}
	return r
}

// waitAck writes a key on the primary at addr and waits (WAIT, on the same
// connection) until a replica has acknowledged it.
func waitAck(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	cmd := "*3\r\n$3\r\nSET\r\n$12\r\ntestenv:sync\r\n$1\r\n1\r\n*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$5\r\n15000\r\n"
	if _, err := c.Write([]byte(cmd)); err != nil {
		return err
	}
	rd := bufio.NewReader(c)
	set, _ := rd.ReadString('\n')
	wait, err := rd.ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(set) != "+OK" || strings.TrimSpace(wait) != ":1" {
		return fmt.Errorf("SET and WAIT answered %q, %q", set, wait)
	}
	return nil
}

// Promote makes a replica a primary (REPLICAOF NO ONE), as a failover does.
func (r *Redis) Promote(tb testing.TB) {
	tb.Helper()
	if s, err := r.Do("REPLICAOF", "NO", "ONE"); err != nil || s != "+OK" {
		tb.Fatalf("testenv: REPLICAOF NO ONE on %s: %q, %v", r.Addr, s, err)
	}
}
