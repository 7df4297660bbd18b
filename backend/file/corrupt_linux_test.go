package file_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/file"
	"golang.org/x/sys/unix"
)

// stateFile is where the state of name lives (a documented layout, not an
// API: tests tamper with it).
func stateFile(dir, name string) string {
	sum := sha256.Sum256([]byte(name))
	return filepath.Join(dir, hex.EncodeToString(sum[:])+".sema")
}

func ctx(t *testing.T, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}

func TestNamesNeverBecomePaths(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "locks")
	b := open(t, dir)
	defer b.Close()
	c := sema.New(b)
	names := []string{"../../etc/passwd", "a/b", "/abs", ".", "..", "~", "name with spaces",
		strings.Repeat("é", 127) + "x", "\u00e9vil \u2603", "C:\\x", "a\\..\\b"}
	var leases []*sema.Lease
	for _, n := range names {
		l, err := c.Mutex(n).TryAcquire(ctx(t, 5*time.Second))
		if err != nil {
			t.Fatalf("TryAcquire(%q): %v", n, err)
		}
		leases = append(leases, l)
	}
	list, err := c.List(ctx(t, 5*time.Second), "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, st := range list {
		got = append(got, st.Name)
	}
	if len(got) != len(names) {
		t.Fatalf("List = %q, want %d names", got, len(names))
	}
	for _, l := range leases {
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if len(e.Name()) != 64+len(".sema") || !strings.HasSuffix(e.Name(), ".sema") {
			t.Errorf("unexpected file %q in the directory", e.Name())
		}
		if fi, _ := e.Info(); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", e.Name(), fi.Mode().Perm())
		}
	}
	if top, _ := os.ReadDir(parent); len(top) != 1 {
		t.Errorf("files outside the directory: %v", top)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, want 0700", fi.Mode().Perm())
	}
	for _, bad := range []string{"", "a\x00b", "a\nb", strings.Repeat("x", 256), "\xff\xfe"} {
		_, err := b.TryAcquire(context.Background(), sema.Request{Name: bad, ID: "id1", Limit: 1, Weight: 1, TTL: time.Second})
		if !errors.Is(err, sema.ErrInvalidName) {
			t.Errorf("TryAcquire(%q) = %v, want ErrInvalidName", bad, err)
		}
		if _, err := b.Describe(context.Background(), bad); !errors.Is(err, sema.ErrInvalidName) {
			t.Errorf("Describe(%q) = %v, want ErrInvalidName", bad, err)
		}
	}
}

// tamper damages a state file, holding the state lock so that it happens
// between two operations.
func tamper(t testing.TB, path string, f func(*os.File)) {
	fd, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	if err := unix.Flock(int(fd.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	f(fd)
}

var tampers = map[string]func(*os.File){
	"truncate to 0":     func(f *os.File) { f.Truncate(0) },
	"truncate to 10":    func(f *os.File) { f.Truncate(10) },
	"truncate slot 0":   func(f *os.File) { f.Truncate(40) },
	"truncate payload":  func(f *os.File) { fi, _ := f.Stat(); f.Truncate(fi.Size() - 1) },
	"garbage at 0":      func(f *os.File) { f.WriteAt([]byte("this is not a state file at all"), 0) },
	"garbage at 40":     func(f *os.File) { f.WriteAt([]byte("garbage garbage garbage garbage"), 40) },
	"zero header":       func(f *os.File) { f.WriteAt(make([]byte, 24), 0) },
	"zero the file":     func(f *os.File) { fi, _ := f.Stat(); f.WriteAt(make([]byte, fi.Size()), 0) },
	"flip payload byte": func(f *os.File) { f.WriteAt([]byte{0xAA}, 30) },
	"bump generation":   func(f *os.File) { f.WriteAt([]byte{0x77}, 12) },
}

// A damaged file never yields a second holder while the first one lives in
// another backend (as in another process), never panics, and never lets a
// token go back.
func TestCorruptFileWhileHeld(t *testing.T) {
	for what, f := range tampers {
		t.Run(what, func(t *testing.T) {
			dir := t.TempDir()
			b1, b2 := open(t, dir), open(t, dir)
			defer b1.Close()
			defer b2.Close()
			c1, c2 := sema.New(b1), sema.New(b2)
			l1, err := c1.Mutex("m").Acquire(ctx(t, 5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			tamper(t, stateFile(dir, "m"), f)
			if _, err := c2.Mutex("m").TryAcquire(ctx(t, 5*time.Second)); !errors.Is(err, sema.ErrNotAcquired) {
				t.Fatalf("TryAcquire while held after damage: %v, want ErrNotAcquired", err)
			}
			if err := l1.Refresh(ctx(t, 5*time.Second)); err != nil {
				t.Fatalf("holder's Refresh after repair: %v", err)
			}
			if _, err := c2.Mutex("m").TryAcquire(ctx(t, 5*time.Second)); !errors.Is(err, sema.ErrNotAcquired) {
				t.Fatalf("TryAcquire while held after repair: %v, want ErrNotAcquired", err)
			}
			if err := l1.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			l2, err := c2.Mutex("m").Acquire(ctx(t, 5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if l2.Token() <= l1.Token() {
				t.Fatalf("token went back: %d after %d", l2.Token(), l1.Token())
			}
			l2.Release(context.Background())
		})
	}
}

// An unknown format version is an error (a newer sema may own the file),
// not a repair that would destroy its state.
func TestWrongVersion(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir)
	defer b.Close()
	c := sema.New(b)
	l, err := c.Mutex("v").Acquire(ctx(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	l.Release(context.Background())
	tamper(t, stateFile(dir, "v"), func(f *os.File) { f.WriteAt([]byte{9, 0}, 4) })
	_, err = c.Mutex("v").TryAcquire(ctx(t, 5*time.Second))
	if !errors.Is(err, sema.ErrUnavailable) || !strings.Contains(err.Error(), "version") {
		t.Fatalf("TryAcquire on a version-9 file: %v, want ErrUnavailable naming the version", err)
	}
	if _, err := c.Describe(ctx(t, 5*time.Second), "v"); !errors.Is(err, sema.ErrUnavailable) {
		t.Fatalf("Describe: %v", err)
	}

	// A waiter queued when the file turns unreadable gets the error.
	l, err = c.Mutex("w").Acquire(ctx(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	b2 := open(t, dir)
	defer b2.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := sema.New(b2).Mutex("w").Acquire(ctx(t, 30*time.Second))
		errc <- err
	}()
	waitQueued(t, dir, "w", 1)
	tamper(t, stateFile(dir, "w"), func(f *os.File) { f.WriteAt([]byte{9, 0}, 4) })
	select {
	case err := <-errc:
		if !errors.Is(err, sema.ErrUnavailable) {
			t.Fatalf("waiter: %v, want ErrUnavailable", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("waiter still waiting on an unreadable file")
	}
	_ = l // its file is unreadable: Release would retry until its timeout
}

// Holders in three backends hammer a semaphore of limit 2 while its file
// is damaged at random between operations: the live weight never exceeds
// the limit, no lease is lost, no token is issued twice.
func TestTamperStress(t *testing.T) {
	const limit, workers, dur = 2, 3, 3 * time.Second
	dir := t.TempDir()
	var held, maxHeld, grants atomic.Int64
	var mu sync.Mutex
	tokens := make(map[uint64]bool)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		b, err := file.Open(dir, &file.Config{Recheck: 50 * time.Millisecond, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		s := sema.New(b).Semaphore("stress", limit, sema.WithTTL(30*time.Second))
		for range workers {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					l, err := s.Acquire(ctx(t, 20*time.Second))
					if err != nil {
						t.Errorf("Acquire: %v", err)
						return
					}
					n := held.Add(1)
					for m := maxHeld.Load(); n > m && !maxHeld.CompareAndSwap(m, n); m = maxHeld.Load() {
					}
					mu.Lock()
					if tokens[l.Token()] {
						t.Errorf("token %d issued twice", l.Token())
					}
					tokens[l.Token()] = true
					mu.Unlock()
					time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
					held.Add(-1)
					grants.Add(1)
					if err := l.Release(context.Background()); err != nil {
						t.Errorf("Release: %v (lease lost while held)", err)
					}
				}
			})
		}
	}
	path := stateFile(dir, "stress")
	kinds := make([]func(*os.File), 0, len(tampers)+1)
	for _, f := range tampers {
		kinds = append(kinds, f)
	}
	kinds = append(kinds, func(f *os.File) { // random bytes anywhere in the records but the version
		off := int64(rand.IntN(200))
		if off >= 4 && off < 6 {
			off = 6
		}
		f.WriteAt([]byte{byte(rand.IntN(256))}, off)
	})
	tampered := 0
	for deadline := time.Now().Add(dur); time.Now().Before(deadline); tampered++ {
		time.Sleep(time.Duration(2+rand.IntN(8)) * time.Millisecond)
		if _, err := os.Stat(path); err == nil {
			tamper(t, path, kinds[rand.IntN(len(kinds))])
		}
	}
	close(stop)
	wg.Wait()
	if m := maxHeld.Load(); m > limit {
		t.Fatalf("%d holders at once, limit %d", m, limit)
	}
	if grants.Load() < 10 {
		t.Fatalf("only %d grants in %v: the name got stuck", grants.Load(), dur)
	}
	t.Logf("%d grants, %d tamperings, max holders %d", grants.Load(), tampered, maxHeld.Load())
}
