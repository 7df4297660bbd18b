package testenv

import (
	"debug/buildinfo"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

func TestRedisRestartKeepsDataWhenPersistent(t *testing.T) {
	r := StartRedis(t, RedisOptions{Persist: true})
	if s, err := r.Do("SET", "k", "v1"); err != nil || s != "+OK" {
		t.Fatalf("SET: %q %v", s, err)
	}
	r.Restart(t, true) // kill -9
	if s, err := r.Do("GET", "k"); err != nil || s != "v1" {
		t.Fatalf("after kill -9 and restart GET = %q, %v; want v1", s, err)
	}
}

func TestSharedRedisIsOne(t *testing.T) {
	if a, b := SharedRedis(t), SharedRedis(t); a != b || a.PID() == 0 {
		t.Fatalf("SharedRedis gave %p and %p (pid %d)", a, b, a.PID())
	}
}

func TestRedisCluster(t *testing.T) {
	c := SharedRedisCluster(t)
	if len(c.Nodes) != 3 {
		t.Fatalf("%d nodes", len(c.Nodes))
	}
	info, err := redisDoAll(c.Nodes[2].Addr, "CLUSTER", "INFO")
	if err != nil || !strings.Contains(info, "cluster_slots_assigned:16384") {
		t.Fatalf("CLUSTER INFO: %v\n%s", err, info)
	}
	if !strings.HasPrefix(c.URL(), "redis://127.0.0.1:") || strings.Count(c.URL(), "addr=") != 2 {
		t.Fatalf("URL %q", c.URL())
	}
}

func TestPostgresRestartAndPooler(t *testing.T) {
	p := StartPostgres(t)
	psql := filepath.Join(p.bindir, "psql")
	query := func(url, sql string) string {
		t.Helper()
		out, err := exec.Command(psql, url, "-XAtc", sql).CombinedOutput()
		if err != nil {
			t.Fatalf("psql %s: %v\n%s", sql, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	query(p.URL(), "CREATE TABLE t (v int); INSERT INTO t VALUES (42)")
	p.Restart(t, true)
	if got := query(p.URL(), "SELECT v FROM t"); got != "42" {
		t.Fatalf("after crash and restart: %q", got)
	}
	b := StartPgBouncer(t, p)
	if got := query(b.URL(), "SELECT v + 1 FROM t"); got != "43" {
		t.Fatalf("through pgbouncer: %q", got)
	}
}

func TestEtcdClusterLeaderKill(t *testing.T) {
	c := StartEtcd(t, 3)
	leader := c.Leader()
	if leader < 0 {
		t.Fatal("no leader")
	}
	c.Members[leader].Kill()
	deadline := time.Now().Add(20 * time.Second)
	for {
		l := c.Leader()
		if l >= 0 && l != leader {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new leader after killing member %d", leader)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.Members[leader].Restart(t)
	if err := c.Members[leader].healthErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("tcp", c.Members[leader].ClientAddr); err != nil {
		t.Fatal(err)
	}
}

// TestSemaBinary: the binary runs, and is race-built exactly when the
// tests are.
func TestSemaBinary(t *testing.T) {
	out, err := exec.Command(SemaBinary(t), "version").CombinedOutput()
	if err != nil || len(out) == 0 {
		t.Fatalf("sema version: %v\n%s", err, out)
	}
	info, err := buildinfo.ReadFile(SemaBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	race := false
	for _, s := range info.Settings {
		race = race || s.Key == "-race" && s.Value == "true"
	}
	if race != Race {
		t.Fatalf("sema built with -race=%v; the tests run with -race=%v", race, Race)
	}
}

// TestStartSema: a server from the race-built binary answers, survives a
// kill -9 and a clean restart on the same data directory, and shuts down
// cleanly.
func TestStartSema(t *testing.T) {
	s := StartSema(t, SemaOptions{})
	pid := s.PID()
	s.Restart(t, true)
	s.Restart(t, false)
	if s.PID() == pid || s.healthy() != nil {
		t.Fatalf("after restarts: pid %d (was %d), health %v", s.PID(), pid, s.healthy())
	}
	s.Freeze()
	WaitFor(t, "the server stopped", s.Stopped)
	s.Thaw()
	s.Shutdown(t)
}
