package redis_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/redis"
	"github.com/sema-dev/sema/internal/testenv"
)

func rawClient(t *testing.T, r *testenv.Redis, password string) *goredis.Client {
	rc := goredis.NewClient(&goredis.Options{Addr: r.Addr, Password: password})
	t.Cleanup(func() { _ = rc.Close() })
	return rc
}

func TestOpenFailures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := testenv.StartRedis(t, testenv.RedisOptions{})
	if s, err := r.Do("CONFIG", "SET", "requirepass", "s3cret"); err != nil || s != "+OK" {
		t.Fatalf("CONFIG SET requirepass: %q, %v", s, err)
	}
	host := strings.TrimPrefix(r.URL(), "redis://")
	for _, tc := range []struct {
		name, url string
		want      error
	}{
		{"nobody listens", "redis://127.0.0.1:1/0?dial_timeout=1s", sema.ErrUnavailable},
		{"no password", r.URL(), sema.ErrPermission},
		{"wrong password", "redis://:wrong-pw@" + host, sema.ErrPermission},
		{"cluster node named alone", testenv.SharedRedisCluster(t).Nodes[0].URL(), sema.ErrInvalidArgument},
		{"bad url", "redis://h:1/0?nosuch=1", sema.ErrInvalidArgument},
	} {
		start := time.Now()
		_, err := redis.Open(ctx, tc.url)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Open = %v, want %v", tc.name, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "wrong-pw") || strings.Count(err.Error(), "sema:") > 1) {
			t.Errorf("%s: message repeats the password or says sema twice: %v", tc.name, err)
		}
		t.Logf("%s: %v (%v)", tc.name, err, time.Since(start).Round(time.Millisecond))
	}
	b := open(t, "redis://:s3cret@"+host)
	if _, err := b.TryAcquire(ctx, req("f/auth", "a1")); err != nil {
		t.Fatalf("with the password: %v", err)
	}

	replica := testenv.StartRedisReplica(t, testenv.StartRedis(t, testenv.RedisOptions{}), testenv.RedisOptions{})
	if _, err := redis.Open(ctx, replica.URL()); !errors.Is(err, sema.ErrUnavailable) || !strings.Contains(err.Error(), "replica") {
		t.Errorf("Open of a replica: %v", err)
	}
}

// TestBadState: keys under the prefix that sema did not write (the wrong
// type, garbage records, garbage counters) make the name's operations fail
// with ErrCorrupt — never a panic, never a grant — and leave the keys as
// they were; deleting them makes the name usable again.
func TestBadState(t *testing.T) {
	r := testenv.SharedRedis(t)
	rc := rawClient(t, r, "")
	b := open(t, r.URL())
	ctx := bg(t)
	t.Cleanup(func() {
		for _, name := range []string{"f/wrongtype", "f/tokentype", "f/counters", "f/record"} {
			rc.Del(context.Background(), "sema:{"+name+"}:s", "sema:{"+name+"}:q", "sema:{"+name+"}:t")
		}
	})
	corrupt := func(name string) {
		t.Helper()
		if _, err := b.TryAcquire(ctx, req(name, "x1")); !errors.Is(err, redis.ErrCorrupt) || !errors.Is(err, sema.ErrUnavailable) {
			t.Errorf("%s: TryAcquire = %v, want ErrCorrupt", name, err)
		}
		if _, err := b.Describe(ctx, name); err == nil {
			t.Errorf("%s: Describe succeeded", name)
		}
	}

	rc.Set(ctx, "sema:{f/wrongtype}:s", "not a hash", 0)
	corrupt("f/wrongtype")
	if v, _ := rc.Get(ctx, "sema:{f/wrongtype}:s").Result(); v != "not a hash" {
		t.Errorf("the key was changed: %q", v)
	}

	rc.HSet(ctx, "sema:{f/tokentype}:t", "f", "v")
	if _, err := b.TryAcquire(ctx, req("f/tokentype", "x1")); !errors.Is(err, redis.ErrCorrupt) {
		t.Errorf("token key of the wrong type: %v", err)
	}
	if n, _ := rc.Exists(ctx, "sema:{f/tokentype}:s").Result(); n != 0 {
		t.Error("a grant was written next to a token key of the wrong type")
	}

	rc.HSet(ctx, "sema:{f/counters}:s", ".m", "garbage")
	corrupt("f/counters")

	if _, err := b.TryAcquire(ctx, req("f/record", "h1")); err != nil {
		t.Fatal(err)
	}
	rc.HSet(ctx, "sema:{f/record}:s", "h1", "h1 nonsense")
	if _, err := b.Renew(ctx, "f/record", "h1", time.Second); !errors.Is(err, redis.ErrCorrupt) {
		t.Errorf("Renew of a garbled record: %v", err)
	}
	if err := b.Release(ctx, "f/record", "h1"); !errors.Is(err, redis.ErrCorrupt) {
		t.Errorf("Release of a garbled record: %v", err)
	}
	// Its weight still counts: nothing more is granted.
	if _, err := b.TryAcquire(ctx, req("f/record", "x1")); err == nil {
		t.Error("a garbled holder's permit was granted again")
	}
	if _, err := b.Describe(ctx, "f/record"); !errors.Is(err, redis.ErrCorrupt) {
		t.Errorf("Describe of a garbled record: %v", err)
	}

	rc.Del(ctx, "sema:{f/record}:s", "sema:{f/record}:q")
	if _, err := b.TryAcquire(ctx, req("f/record", "h2")); err != nil {
		t.Fatalf("after deleting the keys: %v", err)
	}
}

// TestScriptCacheFlushed: after SCRIPT FLUSH (or a restart) the scripts
// are loaded again on first use.
func TestScriptCacheFlushed(t *testing.T) {
	r := testenv.SharedRedis(t)
	b := open(t, r.URL())
	rawClient(t, r, "").ScriptFlush(bg(t))
	if _, err := b.TryAcquire(bg(t), req("f/flushed", "a1")); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(bg(t), "f/flushed", "a1"); err != nil {
		t.Fatal(err)
	}
}

// TestOutOfMemory: a Redis at its memory limit refuses the scripts before
// they change anything; the error says why.
func TestOutOfMemory(t *testing.T) {
	r := testenv.StartRedis(t, testenv.RedisOptions{Args: []string{"--maxmemory", "4mb", "--maxmemory-policy", "noeviction"}})
	rc := rawClient(t, r, "")
	b := open(t, r.URL())
	ctx := bg(t)
	// Small values, so that a refused command's own buffer does not bring
	// the memory back under the limit.
	junk := strings.Repeat("x", 1<<10)
	for i := 0; ; i++ {
		if err := rc.Set(ctx, "junk:"+strconv.Itoa(i), junk, 0).Err(); err != nil {
			if !strings.Contains(err.Error(), "OOM") {
				t.Fatal(err)
			}
			break
		}
	}
	_, err := b.TryAcquire(ctx, req("f/oom", "a1"))
	if !errors.Is(err, sema.ErrUnavailable) || !strings.Contains(err.Error(), "memory") {
		t.Fatalf("TryAcquire out of memory: %v", err)
	}
	if n, _ := rc.Exists(ctx, "sema:{f/oom}:s", "sema:{f/oom}:t").Result(); n != 0 {
		t.Fatalf("a refused script left %d keys", n)
	}
	rc.FlushAll(ctx)
	if _, err := b.TryAcquire(ctx, req("f/oom", "a1")); err != nil {
		t.Fatal(err)
	}
}

// TestWaiterSurvivesRestart: a waiter's place and wake-up survive a crash
// and restart of a persistent Redis (its subscription reconnects).
func TestWaiterSurvivesRestart(t *testing.T) {
	r := testenv.StartRedis(t, testenv.RedisOptions{Persist: true})
	c := sema.New(open(t, r.URL()), sema.WithReleaseTimeout(10*time.Second))
	l, err := c.Mutex("f/restart").Acquire(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l2, err := sema.New(open(t, r.URL())).Mutex("f/restart").Acquire(bg(t))
		if err == nil {
			err = l2.Release(context.Background())
		}
		got <- err
	}()
	waitQueued(t, open(t, r.URL()), "f/restart", 1)
	r.Restart(t, true)
	start := time.Now()
	if err := l.Release(bg(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the waiter was granted %v after the release", time.Since(start))
	case <-time.After(15 * time.Second):
		t.Fatal("the waiter was never granted after the restart")
	}
}

// TestDeadRedisFailsFast: calls to a Redis that died fail with
// ErrUnavailable within their context, never hang.
func TestDeadRedisFailsFast(t *testing.T) {
	r := testenv.StartRedis(t, testenv.RedisOptions{})
	b := open(t, r.URL())
	r.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := b.TryAcquire(ctx, req("f/dead", "a1")); !errors.Is(err, sema.ErrUnavailable) {
		t.Fatalf("TryAcquire on a dead Redis: %v", err)
	}
	if _, err := b.Acquire(ctx, req("f/dead", "a2")); err == nil {
		t.Fatal("Acquire on a dead Redis succeeded")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v", d)
	}
}

// A Redis that stops answering while the backend subscribes to its
// wake-ups holds up neither the caller, whose ctx ends, nor Close: the
// attempt itself lasts until its own timeout.
func TestSubscribeFrozenServer(t *testing.T) {
	r := testenv.StartRedis(t, testenv.RedisOptions{})
	b := open(t, r.URL())
	r.Freeze()
	defer r.Thaw()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := redis.Subscribe(b, ctx); err == nil {
		t.Fatal("subscribed to a frozen server")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("subscribe returned %v after its ctx ended", d)
	}
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waits for the attempt to subscribe")
	}
}

// A server that accepts connections but answers nothing is an error of
// Open within its bound, not after go-redis's retries of every dial and
// read (about 40 s).
func TestOpenFrozenServer(t *testing.T) {
	// Meanwhile, rediss:// on a server without TLS, which takes the
	// handshake for the start of a command and waits: the error says so.
	plain := strings.Replace(testenv.SharedRedis(t).URL(), "redis://", "rediss://", 1)
	tlsErr := make(chan error, 1)
	go func() {
		b, err := redis.Open(context.Background(), plain)
		if err == nil {
			b.Close()
		}
		tlsErr <- err
	}()
	r := testenv.StartRedis(t, testenv.RedisOptions{})
	r.Freeze()
	defer r.Thaw()
	start := time.Now()
	b, err := redis.Open(context.Background(), r.URL())
	if err == nil {
		b.Close()
		t.Fatal("opened a frozen server")
	}
	if !errors.Is(err, sema.ErrUnavailable) {
		t.Errorf("Open: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Open gave up after %v", d)
	}
	if err := <-tlsErr; !errors.Is(err, sema.ErrUnavailable) || !strings.Contains(err.Error(), "if the server has no TLS: redis://") {
		t.Errorf("Open with rediss:// of a server without TLS: %v; want ErrUnavailable pointing at redis://", err)
	}
}
