package etcd_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/etcd"
	"github.com/sema-dev/sema/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestLockHandOffAcrossClients queues waiters of four clients (as four
// processes would) on one lock, with the re-check so long that only etcd's
// watches can wake them. A waiter that gives up must not let the one
// behind it in; the holder's release must reach the head waiter, and a
// waiter granted after waiting must hand the lock on to the one behind it.
func TestLockHandOffAcrossClients(t *testing.T) {
	locks := mutexes(t, etcd.Config{Endpoints: testenv.SharedEtcd(t).Endpoints(), Recheck: time.Minute}, "handoff", 4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := locks[0].Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   *sema.Lease
		err error
	}
	queue := func(s *sema.Semaphore, ctx context.Context, waiters int) <-chan result {
		ch := make(chan result, 1)
		go func() {
			l, err := s.Acquire(ctx)
			ch <- result{l, err}
		}()
		waitWaiters(t, s, waiters)
		return ch
	}
	bctx, bcancel := context.WithCancel(ctx)
	bres := queue(locks[1], bctx, 1)
	cres := queue(locks[2], ctx, 2)
	dres := queue(locks[3], ctx, 3)

	bcancel() // the waiter just behind the holder gives up
	if r := <-bres; r.err == nil {
		t.Fatal("a cancelled Acquire was granted")
	}
	waitWaiters(t, locks[2], 2)
	time.Sleep(300 * time.Millisecond) // time for a wrong grant to show
	select {
	case r := <-cres:
		t.Fatalf("granted while the lock is held (err %v)", r.err)
	default:
	}

	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-cres
	if r.err != nil {
		t.Fatalf("the head waiter after the holder's release: %v", r.err)
	}
	if r.l.Token() <= a.Token() {
		t.Errorf("token %d after %d", r.l.Token(), a.Token())
	}
	select {
	case d := <-dres:
		t.Fatalf("granted while the lock is held (err %v)", d.err)
	default:
	}
	if err := r.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	d := <-dres
	if d.err != nil {
		t.Fatalf("the waiter behind a holder that waited: %v", d.err)
	}
	if d.l.Token() <= r.l.Token() {
		t.Errorf("token %d after %d", d.l.Token(), r.l.Token())
	}
	if err := d.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// mutexes opens n clients with cfg, as n processes would, and returns each
// one's lock of one new name under prefix.
func mutexes(t *testing.T, cfg etcd.Config, prefix string, n int) []*sema.Semaphore {
	t.Helper()
	name := fmt.Sprintf("%s/%d", prefix, time.Now().UnixNano())
	locks := make([]*sema.Semaphore, n)
	for i := range locks {
		b, err := etcd.Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		cl := sema.New(b)
		t.Cleanup(func() { _ = cl.Close() })
		locks[i] = cl.Mutex(name)
	}
	return locks
}

// queued starts an Acquire of s and waits until the name has n waiters;
// the lease (nil if the Acquire failed) comes on the channel.
func queued(t *testing.T, ctx context.Context, s *sema.Semaphore, n int) <-chan *sema.Lease {
	t.Helper()
	ch := make(chan *sema.Lease, 1)
	go func() {
		l, err := s.Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		ch <- l
	}()
	waitWaiters(t, s, n)
	return ch
}

// waitWaiters waits until s has n waiters.
func waitWaiters(t *testing.T, s *sema.Semaphore, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		st, err := s.Describe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Waiters) == n {
			return
		}
	}
	t.Fatalf("%s never had %d waiters", s.Name(), n)
}

// TestLockHandOffWithoutRead hands a lock between three clients, as three
// processes would: the second waiter queues behind one that waits too, so
// it learns only from etcd that the holder ahead of it left. The release
// of the holder that waited must grant it with no read of the queue: the
// release tells, in its own Txn, that a holder left.
func TestLockHandOffWithoutRead(t *testing.T) {
	c := testenv.StartEtcd(t, 1)
	locks := mutexes(t, etcd.Config{Endpoints: c.Endpoints(), Recheck: time.Minute}, "handoff/read", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := locks[0].Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bres := queued(t, ctx, locks[1], 1)
	cres := queued(t, ctx, locks[2], 2)
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b := <-bres
	if b == nil {
		t.FailNow()
	}
	reads := ranges(t, c.Members[0])
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-cres
	if l == nil {
		t.FailNow()
	}
	if n := ranges(t, c.Members[0]) - reads; n != 0 {
		t.Errorf("the hand-off from a holder that waited read etcd %d times, want none", n)
	}
	if l.Token() <= b.Token() {
		t.Errorf("token %d after %d", l.Token(), b.Token())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// ranges returns how many reads (Range calls) member m has served, from
// its metrics.
func ranges(t *testing.T, m *testenv.Etcd) int {
	t.Helper()
	resp, err := http.Get("http://" + m.ClientAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "grpc_server_handled_total{") && strings.Contains(line, `grpc_method="Range"`) &&
			strings.Contains(line, `grpc_code="OK"`) {
			n, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("metrics: %q: %v", line, err)
			}
			return int(n)
		}
	}
	t.Fatalf("metrics of %s: no count of Range calls (%v)", m.ClientAddr, sc.Err())
	return 0
}

// TestLockHolderAcquiredAt: another client's Describe of a lock's holder
// that waited shows, once it has held a moment, when it was granted, not
// when it queued.
func TestLockHolderAcquiredAt(t *testing.T) {
	locks := mutexes(t, etcd.Config{Endpoints: testenv.SharedEtcd(t).Endpoints()}, "handoff/at", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := locks[0].Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch := queued(t, ctx, locks[1], 1)
	time.Sleep(200 * time.Millisecond)
	released := time.Now()
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-ch
	if l == nil {
		t.FailNow()
	}
	defer func() { _ = l.Release(ctx) }()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, err := locks[0].Describe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Holders) != 1 || st.Holders[0].Token != l.Token() {
			t.Fatalf("holders %+v, want the lease of token %d", st.Holders, l.Token())
		}
		if !st.Holders[0].AcquiredAt.Before(released) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the holder acquired at %v, before the lock was released at %v", st.Holders[0].AcquiredAt, released)
		}
	}
}

// TestLockBehindOlderClient: a waiter queued just behind an entry that an
// older client put (no state key) watches that entry itself: when it
// leaves, the waiter reads the queue again, and it is granted once the
// holder ahead releases.
func TestLockBehindOlderClient(t *testing.T) {
	c := testenv.SharedEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	locks := mutexes(t, etcd.Config{Endpoints: c.Endpoints(), Prefix: "older", Recheck: time.Minute}, "handoff/older", 2)
	a, err := locks[0].Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Queue an entry the way an older client did: the entry and the
	// queue's tail, on an etcd lease of its own.
	raw := client(t, c, "", "")
	el, err := raw.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.ReplaceAll(locks[0].Name(), "/", "%2F") // as the keys escape it
	key := "older/q/" + name + "/00000001/ffffffff00000001"
	val := fmt.Sprintf(`{"i":"older-client","w":1,"t":30000,"s":%d}`, time.Now().UnixNano())
	if _, err := raw.Txn(ctx).Then(clientv3.OpPut(key, val, clientv3.WithLease(el.ID)),
		clientv3.OpPut("older/t/"+name+"/00000001", key, clientv3.WithLease(el.ID))).Commit(); err != nil {
		t.Fatal(err)
	}
	ch := queued(t, ctx, locks[1], 2)
	time.Sleep(200 * time.Millisecond)              // the waiter watches what is ahead of it
	if _, err := raw.Delete(ctx, key); err != nil { // the older client's waiter leaves
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // time for a wrong grant to show
	select {
	case l := <-ch:
		t.Fatalf("granted while the lock is held (%v)", l)
	default:
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-ch:
		if l == nil {
			t.FailNow()
		}
		_ = l.Release(ctx)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter behind the older client's entry was not granted after the holder released")
	}
}

// TestLockBehindExpiredWaiter: when the etcd lease of the waiter just
// ahead ends (its process died), the waiter behind it learns from etcd at
// once, waits for the holder still ahead, and is granted when it releases.
func TestLockBehindExpiredWaiter(t *testing.T) {
	c := testenv.SharedEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	locks := mutexes(t, etcd.Config{Endpoints: c.Endpoints(), Prefix: "expired", Recheck: time.Minute}, "handoff/expired", 3)
	a, err := locks[0].Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	results := make([]chan error, 2)
	for i := range results {
		results[i] = make(chan error, 1)
		go func() {
			l, err := locks[i+1].Acquire(ctx)
			if err == nil {
				err = l.Release(ctx)
			}
			results[i] <- err
		}()
		waitWaiters(t, locks[0], i+1)
	}
	raw := client(t, c, "", "")
	resp, err := raw.Get(ctx, "expired/q/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil || len(resp.Kvs) != 3 {
		t.Fatalf("entries: %v, %v", resp, err)
	}
	if _, err := raw.Revoke(ctx, clientv3.LeaseID(resp.Kvs[1].Lease)); err != nil { // the first waiter's
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // time for a wrong grant to show
	select {
	case err := <-results[1]:
		t.Fatalf("granted while the lock is held (%v)", err)
	default:
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-results[1]:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter behind an expired waiter was not granted after the holder released")
	}
}
