package etcd_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/etcd"
	"github.com/sema-dev/sema/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func client(t *testing.T, c *testenv.EtcdCluster, user, pw string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second,
		Username: user, Password: pw, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// An endpoint nobody listens on: Open fails after its dial timeout, not a
// hang, with an error wrapping sema.ErrUnavailable.
func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	start := time.Now()
	_, err = etcd.Open(context.Background(), etcd.Config{Endpoints: []string{addr}, DialTimeout: 300 * time.Millisecond})
	if !errors.Is(err, sema.ErrUnavailable) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Open of a dead endpoint: %v, want ErrUnavailable naming %s", err, addr)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Open took %v with a 300ms dial timeout", d)
	}
	_, err = sema.Open(context.Background(), "etcd://"+addr+"/x?dial-timeout=300ms")
	if !errors.Is(err, sema.ErrUnavailable) {
		t.Fatalf("sema.Open: %v, want ErrUnavailable", err)
	}
	t.Logf("%v", err)
}

// etcd with auth on: wrong or missing credentials are sema.ErrPermission;
// the right ones work, from a URL too.
func TestCredentials(t *testing.T) {
	c := testenv.StartEtcd(t, 1)
	ctx := context.Background()
	cli := client(t, c, "", "")
	for _, step := range []func() error{
		func() error { _, err := cli.RoleAdd(ctx, "root"); return err },
		func() error { _, err := cli.UserAdd(ctx, "root", "s3cret/pw"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		// A user who may read and write under the prefix "app" only, as
		// a shared cluster would give one.
		func() error { _, err := cli.RoleAdd(ctx, "app"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "app", "app/", clientv3.GetPrefixRangeEnd("app/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, "app", "pw"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "app", "app"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("enabling auth: %v", err)
		}
	}
	for _, cfg := range []etcd.Config{
		{Endpoints: c.Endpoints(), Username: "root", Password: "wrong"},
		{Endpoints: c.Endpoints(), Username: "nobody", Password: "x"},
		{Endpoints: c.Endpoints()},
	} {
		_, err := etcd.Open(ctx, cfg)
		if !errors.Is(err, sema.ErrPermission) {
			t.Errorf("Open as %q: %v, want ErrPermission", cfg.Username, err)
		}
	}
	b, err := sema.Open(ctx, "etcd://root:s3cret%2Fpw@"+c.Endpoints()[0]+"/auth")
	if err != nil {
		t.Fatalf("Open with the right password: %v", err)
	}
	cl := sema.New(b)
	defer cl.Close()
	l, err := cl.Mutex("authed").TryAcquire(ctx)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}

	// The user of one prefix: every step stays under it (a waiter, a
	// listing, a force-release), and another prefix is refused.
	b, err = sema.Open(ctx, "etcd://app:pw@"+c.Endpoints()[0]+"/app")
	if err != nil {
		t.Fatalf("Open as the user of the prefix: %v", err)
	}
	ac := sema.New(b)
	defer ac.Close()
	held, err := ac.Mutex("job").Acquire(ctx)
	if err != nil {
		t.Fatalf("Acquire under the prefix: %v", err)
	}
	got := queued(t, ctx, ac.Mutex("job"), 1) // Describe shows it waiting
	if ls, err := ac.List(ctx, ""); err != nil || len(ls) != 1 {
		t.Fatalf("List under the prefix: %v, %v; want one name", ls, err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatalf("Release under the prefix: %v", err)
	}
	if l := <-got; l == nil || l.Release(ctx) != nil {
		t.Fatal("the waiter under the prefix was not granted, or its release failed")
	}
	if held, err = ac.Mutex("job").Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if hs, err := ac.ForceRelease(ctx, "job", "", sema.ForceNow()); err != nil || len(hs) != 1 {
		t.Fatalf("ForceRelease under the prefix: %v, %v; want one holder", hs, err)
	}
	if _, err := ac.Mutex("job").TryAcquire(ctx); err != nil {
		t.Fatalf("TryAcquire after a force-release now: %v", err)
	}
	if _, err := sema.Open(ctx, "etcd://app:pw@"+c.Endpoints()[0]+"/other"); !errors.Is(err, sema.ErrPermission) {
		t.Fatalf("Open as the user of app on another prefix: %v, want ErrPermission", err)
	}
}

// Compaction and defragmentation while a waiter waits: it is granted when
// the holder releases, and tokens go on increasing.
func TestCompaction(t *testing.T) {
	c := testenv.SharedEtcd(t)
	ctx := context.Background()
	cl := sema.New(open(t, c, "compact"))
	defer cl.Close()
	peer := sema.New(open(t, c, "compact"))
	defer peer.Close()
	m := cl.Mutex("c")
	l1, err := m.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *sema.Lease, 1)
	go func() {
		l, err := peer.Mutex("c").Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitQueued(t, c, "compact", "c", 1)
	raw := client(t, c, "", "")
	resp, err := raw.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Defragment(ctx, c.Endpoints()[0]); err != nil {
		t.Fatal(err)
	}
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := <-got
	if l2 == nil {
		t.FailNow()
	}
	if l2.Token() <= l1.Token() {
		t.Fatalf("token %d after compaction, was %d", l2.Token(), l1.Token())
	}
	_ = l2.Release(ctx)
}

// An etcd lease revoked behind sema's back: the holder learns at its next
// renewal (ErrExpired) and the waiter gets the permits; a waiter whose
// etcd lease is revoked queues again and is still granted.
func TestRevokedEtcdLease(t *testing.T) {
	c := testenv.SharedEtcd(t)
	ctx := context.Background()
	raw := client(t, c, "", "")
	leaseOf := func(b *etcd.Backend, name, id string) clientv3.LeaseID {
		t.Helper()
		resp, err := raw.Get(ctx, "revoke/q/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range resp.Kvs {
			if strings.Contains(string(kv.Value), `"i":"`+id+`"`) {
				return clientv3.LeaseID(kv.Lease)
			}
		}
		t.Fatalf("no entry of lease %s", id)
		return 0
	}
	holderB := open(t, c, "revoke")
	holder := sema.New(holderB)
	defer holder.Close()
	l, err := holder.Mutex("r").Acquire(ctx, sema.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Revoke(ctx, leaseOf(holderB, "r", l.ID())); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the holder never learned its etcd lease was revoked")
	}
	if !errors.Is(l.Err(), sema.ErrLeaseLost) {
		t.Fatalf("Err = %v, want ErrLeaseLost", l.Err())
	}

	// A waiter's lease revoked: it queues again.
	l2, err := holder.Mutex("r").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waiterB := open(t, c, "revoke")
	waiter := sema.New(waiterB)
	defer waiter.Close()
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		l, err := waiter.Mutex("r").Acquire(wctx, sema.WithTTL(3*time.Second))
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	waitQueued(t, c, "revoke", "r", 1)
	st, err := holderB.Describe(ctx, "r")
	if err != nil || len(st.Waiters) != 1 {
		t.Fatalf("Describe: %+v, %v", st, err)
	}
	resp, _ := raw.Get(ctx, "revoke/q/", clientv3.WithPrefix())
	for _, kv := range resp.Kvs {
		if !strings.Contains(string(kv.Value), l2.ID()) {
			_, _ = raw.Revoke(ctx, clientv3.LeaseID(kv.Lease)) // the waiter's
		}
	}
	time.Sleep(500 * time.Millisecond)
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter whose etcd lease was revoked: %v", err)
	}
}

// A value that is not sema's in an entry key counts as the whole limit
// (nobody is let in beside something unknown), shows in Describe, and an
// admin's force-release removes it.
func TestGarbageEntry(t *testing.T) {
	c := testenv.SharedEtcd(t)
	ctx := context.Background()
	raw := client(t, c, "", "")
	if _, err := raw.Put(ctx, "garbage/q/g/00000002/00000000000000ff", "not json"); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Put(ctx, "garbage/q/g/not-an-entry", "x"); err != nil {
		t.Fatal(err)
	}
	b := open(t, c, "garbage")
	cl := sema.New(b)
	defer cl.Close()
	_, err := cl.Semaphore("g", 2).TryAcquire(ctx)
	var he *sema.HeldError
	if !errors.As(err, &he) || len(he.Holders) != 1 || he.Holders[0].Weight != 2 {
		t.Fatalf("TryAcquire beside garbage: %v, want held by one unreadable entry of weight 2", err)
	}
	st, err := b.Describe(ctx, "g")
	if err != nil || len(st.Holders) != 1 || !strings.Contains(st.Holders[0].Owner, "unreadable") {
		t.Fatalf("Describe = %+v, %v", st, err)
	}
	if hs, err := b.ForceRelease(ctx, "g", "", sema.ForceOptions{Now: true}); err != nil || len(hs) != 1 {
		t.Fatalf("ForceRelease = %+v, %v", hs, err)
	}
	l, err := cl.Semaphore("g", 2).TryAcquire(ctx, sema.WithWeight(2))
	if err != nil {
		t.Fatalf("after the force-release: %v", err)
	}
	_ = l.Release(ctx)
}

// Close while an Acquire waits: the wait ends with sema.ErrClosed and its
// entry is gone.
func TestCloseWhileWaiting(t *testing.T) {
	c := testenv.SharedEtcd(t)
	ctx := context.Background()
	holder := sema.New(open(t, c, "closing"))
	defer holder.Close()
	l, err := holder.Mutex("w").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b := open(t, c, "closing")
	done := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, sema.Request{Name: "w", ID: "waiterclosed", Limit: 1, Weight: 1, TTL: time.Minute})
		done <- err
	}()
	waitQueued(t, c, "closing", "w", 1)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, sema.ErrClosed) {
		t.Fatalf("Acquire during Close: %v, want ErrClosed", err)
	}
	st, err := holder.Describe(ctx, "w")
	if err != nil || len(st.Waiters) != 0 {
		t.Fatalf("after Close: %+v, %v; want no waiter", st, err)
	}
	_ = l.Release(ctx)
}

// etcd killed and restarted: tokens go on increasing.
func TestEtcdRestart(t *testing.T) {
	c := testenv.StartEtcd(t, 1)
	ctx := context.Background()
	cl := sema.New(open(t, c, "restart"))
	l, err := cl.Mutex("x").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := l.Token()
	_ = l.Release(ctx)
	cl.Close()
	c.Members[0].Kill()
	c.Members[0].Restart(t)
	cl = sema.New(open(t, c, "restart"))
	defer cl.Close()
	l, err = cl.Mutex("x").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() <= before {
		t.Fatalf("token %d after a restart, was %d", l.Token(), before)
	}
	_ = l.Release(ctx)
}
