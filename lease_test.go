package sema_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unicode"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/mem"
)

// blackhole is a backend whose renewals never answer until their context
// ends, as a partitioned server would.
type blackhole struct {
	*mem.Backend
	renews atomic.Int64
	hang   atomic.Bool
}

func (b *blackhole) Renew(ctx context.Context, name, id string, ttl time.Duration) (sema.Grant, error) {
	b.renews.Add(1)
	if b.hang.Load() {
		<-ctx.Done()
		return sema.Grant{}, errors.Join(sema.ErrUnavailable, ctx.Err())
	}
	return b.Backend.Renew(ctx, name, id, ttl)
}

// The local deadline fires at sent + TTL − margin, even though the backend
// never answers, and before the backend's own expiry — also when the
// backend's clock (the base of its grant times) started before the client's.
func TestLocalDeadlineWithoutAnswers(t *testing.T) {
	for _, gap := range []time.Duration{0, 5 * time.Second} {
		t.Run(fmt.Sprint("backend older by ", gap), func(t *testing.T) { testLocalDeadline(t, gap) })
	}
}

func testLocalDeadline(t *testing.T, gap time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		b := &blackhole{Backend: mem.New()}
		b.hang.Store(true)
		time.Sleep(gap)
		c := sema.New(b)
		start := time.Now()
		l, err := c.Mutex("job").Acquire(t.Context(), sema.WithTTL(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(8*time.Second - time.Nanosecond) // TTL 10s − margin TTL/5
		synctest.Wait()
		if l.Err() != nil {
			t.Fatalf("lease ended early, after %v: %v", time.Since(start), l.Err())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		select {
		case <-l.Done():
		default:
			t.Fatalf("lease not ended at sent+TTL−margin (%v)", time.Since(start))
		}
		if !errors.Is(l.Err(), sema.ErrExpired) || !errors.Is(context.Cause(l.Context()), sema.ErrExpired) {
			t.Fatalf("Err = %v, cause %v", l.Err(), context.Cause(l.Context()))
		}
		if !time.Now().Before(l.ExpiresAt()) {
			t.Fatalf("ended at %v, not before the backend expiry %v", time.Now(), l.ExpiresAt())
		}
		if n := b.renews.Load(); n < 2 {
			t.Errorf("%d renewal attempts, want retries inside the safe window", n)
		}
		if err := l.Release(context.Background()); !errors.Is(err, sema.ErrLeaseLost) {
			t.Errorf("Release after loss = %v, want ErrLeaseLost", err)
		}
	})
}

// Keepalive renews every TTL/3 and keeps the lease alive indefinitely;
// Release stops it synchronously.
func TestKeepaliveInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &blackhole{Backend: mem.New()}
		c := sema.New(b)
		l, err := c.Mutex("job").Acquire(t.Context(), sema.WithTTL(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10*time.Second + time.Millisecond)
		synctest.Wait()
		if n := b.renews.Load(); n != 10 {
			t.Errorf("%d renewals in 10 s with TTL 3 s, want 10", n)
		}
		if l.Err() != nil {
			t.Fatalf("lease ended: %v", l.Err())
		}
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		n := b.renews.Load()
		time.Sleep(time.Minute)
		synctest.Wait()
		if b.renews.Load() != n {
			t.Fatal("renewal after Release")
		}
		if !errors.Is(l.Err(), sema.ErrReleased) {
			t.Fatalf("Err = %v", l.Err())
		}
	})
}

// A renewal that hangs does not keep Release waiting: Release cancels it.
func TestReleaseCancelsHungRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &blackhole{Backend: mem.New()}
		c := sema.New(b)
		l, err := c.Mutex("job").Acquire(t.Context(), sema.WithTTL(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		b.hang.Store(true)
		time.Sleep(10*time.Second + time.Millisecond) // a renewal is now in flight
		synctest.Wait()
		start := time.Now()
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("Release waited %v for the hung renewal", d)
		}
	})
}

func TestMaxHoldStopsRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &blackhole{Backend: mem.New()}
		c := sema.New(b)
		l, err := c.Mutex("job").Acquire(t.Context(), sema.WithTTL(3*time.Second), sema.WithMaxHold(7*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		<-l.Done()
		if !errors.Is(l.Err(), sema.ErrMaxHold) {
			t.Fatalf("Err = %v", l.Err())
		}
		// Renewal stopped: the backend frees it one TTL after the last renewal.
		l2, err := c.Mutex("job").Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if el := time.Since(l.AcquiredAt()); el < 7*time.Second || el > 10*time.Second {
			t.Errorf("re-granted %v after the first grant, want between MaxHold and MaxHold+TTL", el)
		}
		_ = l2.Release(context.Background())
	})
}

// Release works with an already-cancelled caller context.
func TestReleaseWithCancelledContext(t *testing.T) {
	c := sema.New(mem.New())
	l, err := c.Mutex("x").Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release with cancelled ctx: %v", err)
	}
	if _, err := c.Mutex("x").TryAcquire(context.Background()); err != nil {
		t.Fatalf("still held after Release: %v", err)
	}
}

// Do reports a lease lost while fn ran, even if fn itself succeeded.
func TestDoReportsLoss(t *testing.T) {
	b := mem.New()
	c := sema.New(b)
	err := c.Do(context.Background(), "x", func(ctx context.Context) error {
		if _, err := c.ForceRelease(context.Background(), "x", ""); err != nil {
			return err
		}
		<-ctx.Done() // told at once (mem is a ForceNotifier)
		return nil
	}, sema.WithTTL(300*time.Millisecond))
	if !errors.Is(err, sema.ErrForceReleased) || !errors.Is(err, sema.ErrLeaseLost) {
		t.Fatalf("Do = %v, want ErrForceReleased", err)
	}
}

// TestForceBy: the label of who force-releases is checked as an owner
// label is, and defaults to the client's owner label, which the holder is
// told.
func TestForceBy(t *testing.T) {
	ctx := context.Background()
	c := sema.New(mem.New(), sema.WithOwnerDefault("ops@bastion"))
	for _, bad := range []string{"tab\there", string(make([]byte, sema.MaxOwnerLen+1)), "\xff"} {
		if _, err := c.ForceRelease(ctx, "x", "", sema.ForceBy(bad)); !errors.Is(err, sema.ErrInvalidArgument) {
			t.Errorf("ForceBy(%q): %v, want ErrInvalidArgument", bad, err)
		}
	}
	l, err := c.Mutex("x").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ForceRelease(ctx, "x", ""); err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	var fe *sema.ForcedError
	if !errors.As(l.Err(), &fe) || fe.By != "ops@bastion" || l.Err().Error() != "sema: lease force-released by ops@bastion" {
		t.Errorf("lease ended with %v, want force-released by ops@bastion", l.Err())
	}
}

func TestClosedClient(t *testing.T) {
	c := sema.New(mem.New())
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Mutex("x").Acquire(context.Background()); !errors.Is(err, sema.ErrClosed) {
		t.Fatalf("Acquire after Close = %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

func TestHeldErrorMessage(t *testing.T) {
	c := sema.New(mem.New())
	l, _ := c.Semaphore("db", 2).Acquire(context.Background(), sema.WithOwner("alice"), sema.WithWeight(2))
	defer l.Release(context.Background())
	_, err := c.Semaphore("db", 2).TryAcquire(context.Background())
	want := `sema: not acquired: "db" held (2/2) by "alice" (token 1)`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant  %s", err, want)
	}
}

// Names that would look like other names in a listing are refused: bidi
// overrides and zero-width characters, wherever they stand.
func TestNameFormatCharacters(t *testing.T) {
	for _, name := range []string{"ad\u202emin", "admin\u200b", "\u200dx", "a\u2066b\u2069", "\ufeffname", "soft\u00adhyphen"} {
		if err := sema.ValidateName(name); !errors.Is(err, sema.ErrInvalidName) {
			t.Errorf("ValidateName(%q) = %v, want ErrInvalidName", name, err)
		}
		r := sema.Request{Name: name, ID: "abc", Limit: 1, Weight: 1, TTL: time.Second}
		if err := r.Validate(); !errors.Is(err, sema.ErrInvalidName) {
			t.Errorf("Request{Name: %q}.Validate() = %v, want ErrInvalidName", name, err)
		}
	}
	for _, name := range []string{"jobs/nightly", "café", "日本語", "emoji-🔒"} {
		if err := sema.ValidateName(name); err != nil {
			t.Errorf("ValidateName(%q) = %v", name, err)
		}
	}
}

// A process ID is bounded like every other field: the largest one a
// backend must store is MaxPID.
func TestRequestPIDBounds(t *testing.T) {
	for pid, ok := range map[int]bool{0: true, 1: true, sema.MaxPID: true, sema.MaxPID + 1: false, -1: false, 1 << 40: false} {
		r := sema.Request{Name: "n", ID: "abc", Limit: 1, Weight: 1, TTL: time.Second, PID: pid}
		if err := r.Validate(); (err == nil) != ok || err != nil && !errors.Is(err, sema.ErrInvalidArgument) {
			t.Errorf("PID %d: Validate() = %v, want ok=%v", pid, err, ok)
		}
	}
}

// Releasing a lease that was never acquired is an error, not a panic.
func TestReleaseNilLease(t *testing.T) {
	var l *sema.Lease
	if err := l.Release(context.Background()); !errors.Is(err, sema.ErrNotHeld) {
		t.Fatalf("(*Lease)(nil).Release = %v, want ErrNotHeld", err)
	}
}

func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"a", "", "a/b", "../../etc/passwd", "\x00", "é", "\xff", "a\u0085b", "a\u202eb", string(make([]byte, 256))} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := sema.ValidateName(name)
		if err != nil && !errors.Is(err, sema.ErrInvalidName) {
			t.Fatalf("error %v does not wrap ErrInvalidName", err)
		}
		if err == nil {
			if len(name) == 0 || len(name) > sema.MaxNameLen {
				t.Fatalf("accepted %d bytes", len(name))
			}
			for _, r := range name {
				if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0xfffd {
					t.Fatalf("accepted control or invalid rune %U in %q", r, name)
				}
				if unicode.Is(unicode.Cf, r) {
					t.Fatalf("accepted format character %U in %q", r, name)
				}
			}
		}
	})
}

func FuzzRequestValidate(f *testing.F) {
	f.Add("name", "ABCDEFGH", "owner", int64(1), int64(1), int64(time.Second))
	f.Add("../x", "a/b", "", int64(0), int64(-1), int64(0))
	f.Add("n", "id", "id", int64(3), int64(4), int64(time.Hour*1000))
	f.Fuzz(func(t *testing.T, name, id, owner string, limit, weight, ttl int64) {
		r := sema.Request{Name: name, ID: id, Owner: owner, Limit: limit, Weight: weight, TTL: time.Duration(ttl)}
		err := r.Validate()
		if err == nil {
			if limit < 1 || weight < 1 || weight > limit || r.TTL < sema.MinTTL || r.TTL > sema.MaxTTL || id == "" || id == owner {
				t.Fatalf("accepted %+v", r)
			}
			return
		}
		if !errors.Is(err, sema.ErrInvalidName) && !errors.Is(err, sema.ErrInvalidArgument) {
			t.Fatalf("error %v wraps no sentinel", err)
		}
	})
}

// Leases that end while others start must never touch a timer lent to
// another lease: every lease still ends on its own deadline.
func TestTimersNotShared(t *testing.T) {
	c := sema.New(mem.New())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			m := c.Mutex(fmt.Sprintf("churn-%d", i))
			for {
				select {
				case <-stop:
					return
				default:
				}
				l, err := m.Acquire(context.Background(), sema.WithTTL(time.Second), sema.WithoutKeepalive())
				if err == nil {
					_ = l.Release(context.Background())
				}
			}
		})
	}
	var leases []*sema.Lease
	for i := range 20 {
		l, err := c.Mutex(fmt.Sprintf("watched-%d", i)).Acquire(context.Background(), sema.WithTTL(500*time.Millisecond), sema.WithoutKeepalive())
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
		time.Sleep(5 * time.Millisecond)
	}
	for _, l := range leases {
		select {
		case <-l.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("%s never reached its deadline: its timer was stopped by another lease", l)
		}
	}
	close(stop)
	wg.Wait()
}

// Release called by many goroutines at once gives the permits back once and
// every call returns the first call's result, also for a lease lost before.
func TestConcurrentRelease(t *testing.T) {
	c := sema.New(mem.New())
	m := c.Mutex("concurrent-release")
	ctx := context.Background()
	for _, lose := range []bool{false, true} {
		l, err := m.Acquire(ctx, sema.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if lose {
			if _, err := c.ForceRelease(ctx, m.Name(), l.ID()); err != nil {
				t.Fatal(err)
			}
			if err := l.Refresh(ctx); !errors.Is(err, sema.ErrLeaseLost) {
				t.Fatalf("refresh after force-release: %v", err)
			}
		}
		errs := make([]error, 16)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() { errs[i] = l.Release(ctx) })
		}
		wg.Wait()
		for i, err := range errs {
			if lose != (err != nil) || (err != nil && err.Error() != errs[0].Error()) {
				t.Fatalf("lost=%v: Release %d returned %v, the first %v", lose, i, err, errs[0])
			}
		}
		if lose && !errors.Is(errs[0], sema.ErrForceReleased) {
			t.Fatalf("release of a force-released lease: %v", errs[0])
		}
		l2, err := m.TryAcquire(ctx)
		if err != nil {
			t.Fatalf("after the releases the mutex is not free: %v", err)
		}
		_ = l2.Release(ctx)
	}
}
