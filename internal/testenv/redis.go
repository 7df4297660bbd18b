package testenv

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Redis is a redis-server on 127.0.0.1.
type Redis struct {
	*Proc
	Addr string // 127.0.0.1:port
}

// RedisOptions tunes StartRedis.
type RedisOptions struct {
	// Persist turns on the append-only file with an fsync per write, so a
	// restart (even after kill -9) keeps every acknowledged write.
	Persist bool
	// Args are more redis-server arguments ("--maxmemory", "1mb", …).
	Args []string
}

// URL is the redis:// URL of the server, database 0.
func (r *Redis) URL() string { return "redis://" + r.Addr + "/0" }

// StartRedis starts a redis-server of its own for the calling test; it is
// stopped when the test ends.
func StartRedis(tb testing.TB, opt RedisOptions) *Redis {
	tb.Helper()
	r := startRedis(tb, opt, false)
	tb.Cleanup(func() { r.Stop(0); removeAll(r.Dir) })
	return r
}

func startRedis(tb testing.TB, opt RedisOptions, cluster bool) *Redis {
	tb.Helper()
	bin := lookBin(tb, "redis-server", "redis-server")
	dir := tempDir(tb, "redis")
	var lastErr error
	for range 3 {
		port, err := freePort(cluster)
		if err != nil {
			tb.Fatal(err)
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--protected-mode", "yes",
			"--dir", dir, "--daemonize", "no", "--save", "", "--logfile", ""}
		if opt.Persist {
			args = append(args, "--appendonly", "yes", "--appendfsync", "always")
		} else {
			args = append(args, "--appendonly", "no")
		}
		if cluster {
			args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", "3000")
		}
		args = append(args, opt.Args...)
		r := &Redis{Proc: newProc("redis "+addr, dir, bin, args), Addr: addr}
		if lastErr = r.Start(); lastErr != nil {
			continue
		}
		if lastErr = r.waitReady(func() error { return r.pingErr() }); lastErr == nil {
			return r
		}
		r.Stop(0)
	}
	removeAll(dir)
	tb.Fatalf("testenv: redis-server did not start: %v", lastErr)
	return nil
}

// Restart stops the server (SIGTERM, or kill -9 if crash) and starts it
// again on the same port and directory, waiting until it answers.
func (r *Redis) Restart(tb testing.TB, crash bool) {
	tb.Helper()
	if crash {
		r.Kill()
	} else {
		r.Stop(0)
	}
	if err := r.Start(); err != nil {
		tb.Fatal(err)
	}
	if err := r.waitReady(func() error { return r.pingErr() }); err != nil {
		tb.Fatal(err)
	}
}

// Do sends one command in RESP and returns the first line of the answer
// (enough for PING, CLUSTER INFO's state, CONFIG SET…). For tests and
// readiness checks only; the backend uses go-redis.
func (r *Redis) Do(args ...string) (string, error) { return redisDo(r.Addr, args...) }

func (r *Redis) pingErr() error {
	s, err := r.Do("PING")
	if err != nil {
		return err
	}
	if s != "+PONG" {
		return fmt.Errorf("PING answered %q", s)
	}
	return nil
}

func redisDo(addr string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	rd := bufio.NewReader(c)
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if strings.HasPrefix(line, "$") { // bulk string: return its body
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return line, nil
		}
		body := make([]byte, n+2)
		if _, err := io.ReadFull(rd, body); err != nil {
			return "", err
		}
		return string(body[:n]), nil
	}
	return line, nil
}
