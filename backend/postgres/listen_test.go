package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

// The listen connection is cut (pg_terminate_backend) while a request
// waits: the listener reconnects, the waiter looks at its request again,
// and hand-offs arrive by notification again. Recheck is 30s here, so a
// grant within seconds comes from an event, not from the fallback.
func TestListenConnectionLost(t *testing.T) {
	cfg := shared(t)
	cfg.Recheck, cfg.WaiterTTL = 30*time.Second, 90*time.Second
	b := open(t, cfg)
	peer := open(t, shared(t))
	a := admin(t)
	name := uniqueName("listen/lost")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for round := range 3 {
		if _, err := peer.TryAcquire(ctx, req(name, "holder")); err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			g, err := b.Acquire(ctx, req(name, "waiter"))
			if err == nil {
				err = b.Release(ctx, name, g.ID)
			}
			got <- err
		}()
		waitQueued(t, peer, name, 1)
		if round == 1 {
			// Cut it, and release at once: the notification may be lost
			// while the listener reconnects; its re-check finds the grant.
			sqlExec(t, a, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'sema listen'")
		}
		start := time.Now()
		if err := peer.Release(ctx, name, "holder"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the waiter was not granted within 10s of the release", round)
		}
		t.Logf("round %d: granted %v after the release", round, time.Since(start).Round(time.Microsecond))
	}
	if n := b.Stats().Reconnects; n < 2 {
		t.Fatalf("listen connection opened %d times, want ≥ 2", n)
	}
}

// Processes that open the same fresh tables at once create them once.
func TestConcurrentFirstUse(t *testing.T) {
	prefix := freshPrefix()
	url := shared(t).URL + "&sema_prefix=" + prefix
	errs := make(chan string, 8)
	for range 8 {
		go func() {
			_, stderr, code := runSema(t, "status", "--backend", url, "first/use")
			if code != 0 {
				stderr = "exit " + stderr
			} else {
				stderr = ""
			}
			errs <- stderr
		}()
	}
	for range 8 {
		if e := <-errs; e != "" {
			t.Fatalf("sema status on fresh tables: %s", e)
		}
	}
	var rows, version int
	if err := admin(t).QueryRow(context.Background(), "SELECT count(*), max(version) FROM "+prefix+"version").Scan(&rows, &version); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || version != 3 { // the schema version this sema creates
		t.Fatalf("version table: %d rows, version %d", rows, version)
	}
	// And the tables work.
	b := open(t, cfgWithPrefix(t, prefix))
	if _, err := sema.New(b).Mutex("first/use").TryAcquire(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// One lease ID waits on two names in one backend (a client of sema serve
// chooses its IDs): the grant of one name reaches its own waiter, and the
// waiter of the other name keeps waiting, its name still held.
func TestSameIDOnTwoNames(t *testing.T) {
	cfg := shared(t)
	cfg.Recheck = 30 * time.Second
	b := open(t, cfg)
	peer := open(t, shared(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, second := uniqueName("listen/same-id"), uniqueName("listen/same-id")
	got := map[string]chan error{}
	for _, name := range []string{first, second} {
		if _, err := peer.TryAcquire(ctx, req(name, "holder")); err != nil {
			t.Fatal(err)
		}
		ch := make(chan error, 1)
		got[name] = ch
		go func() {
			g, err := b.Acquire(ctx, req(name, "shared"))
			if err == nil && g.Name != name {
				err = fmt.Errorf("granted %q", g.Name)
			}
			ch <- err
		}()
		waitQueued(t, peer, name, 1)
	}
	if err := peer.Release(ctx, first, "holder"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got[first]:
		if err != nil {
			t.Fatalf("the waiter of %q: %v", first, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the waiter of %q was not granted within 10s of the release", first)
	}
	select {
	case err := <-got[second]:
		t.Fatalf("the waiter of %q returned while its name is held: %v", second, err)
	case <-time.After(500 * time.Millisecond):
	}
	st, err := b.Describe(ctx, second)
	if err != nil || len(st.Holders) != 1 || st.Holders[0].ID != "holder" || len(st.Waiters) != 1 {
		t.Fatalf("Describe(%q) = %+v, %v; want the peer's lease and one waiter", second, st, err)
	}
	if err := peer.Release(ctx, second, "holder"); err != nil {
		t.Fatal(err)
	}
	if err := <-got[second]; err != nil {
		t.Fatalf("the waiter of %q: %v", second, err)
	}
}
