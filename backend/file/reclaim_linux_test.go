package file_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/file"
)

func stateFiles(t *testing.T, dir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.sema"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// acquireOnce takes and releases name on a backend of its own, closed
// after: its process no longer uses the file. It returns the token.
func acquireOnce(t *testing.T, dir, name string) uint64 {
	t.Helper()
	b := open(t, dir)
	defer b.Close()
	l, err := sema.New(b).Mutex(name).Acquire(ctx(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	return l.Token()
}

// 200 date-stamped job names leave no state files once reclaimed; a
// reclaim that asks for a longer idle time than they had removes none.
func TestReclaimDateStampedNames(t *testing.T) {
	dir := t.TempDir()
	day := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 200 {
		acquireOnce(t, dir, "nightly-report-"+day.AddDate(0, 0, i).Format(time.DateOnly))
	}
	if n := stateFiles(t, dir); n != 200 {
		t.Fatalf("%d state files, want 200", n)
	}
	b := open(t, dir)
	if n, err := b.Reclaim(context.Background(), time.Hour); err != nil || n != 0 {
		t.Fatalf("Reclaim(1h) = %d, %v; want 0, nil", n, err)
	}
	n, err := b.Reclaim(context.Background(), 0)
	if err != nil || n != 200 {
		t.Fatalf("Reclaim(0) = %d, %v; want 200, nil", n, err)
	}
	if n := stateFiles(t, dir); n != 0 {
		t.Fatalf("%d state files left, want 0", n)
	}
}

// A reclaimed name used again gets a token above every token it ever had,
// however many times it is reclaimed.
func TestReclaimedNameTokensGoUp(t *testing.T) {
	dir := t.TempDir()
	top := make(map[string]uint64)
	use := func(round int, name string) {
		t.Helper()
		tok := acquireOnce(t, dir, name)
		if tok <= top[name] {
			t.Fatalf("round %d: %q got token %d, not above its earlier %d", round, name, tok, top[name])
		}
		top[name] = tok
	}
	for range 5 {
		use(-1, "a")
	}
	for range 20 {
		use(-1, "b")
	}
	b := open(t, dir)
	for round := range 4 {
		if n, err := b.Reclaim(context.Background(), 0); err != nil || n == 0 {
			t.Fatalf("round %d: Reclaim = %d, %v", round, n, err)
		}
		for _, name := range []string{"a", "b", "a"} {
			use(round, name)
		}
	}
	if top["a"] <= 20 {
		t.Fatalf("a's last token %d: its counter restarted below b's reclaimed 20", top["a"])
	}
}

// Names in use are left alone: held, waited for, or open in a process
// that used them within its IdleClose.
func TestReclaimLeavesNamesInUse(t *testing.T) {
	dir := t.TempDir()
	holder := open(t, dir)
	l, err := sema.New(holder).Mutex("held").Acquire(ctx(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	recent, err := file.Open(dir, &file.Config{IdleClose: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer recent.Close()
	r, err := sema.New(recent).Mutex("recent").Acquire(ctx(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r.Release(context.Background())
	acquireOnce(t, dir, "idle")

	gc := open(t, dir)
	if n, err := gc.Reclaim(context.Background(), 0); err != nil || n != 1 {
		t.Fatalf("Reclaim = %d, %v; want 1 (the idle name), nil", n, err)
	}
	if _, err := os.Stat(stateFile(dir, "idle")); !os.IsNotExist(err) {
		t.Fatalf("idle name's file: %v, want removed", err)
	}
	for _, name := range []string{"held", "recent"} {
		if _, err := os.Stat(stateFile(dir, name)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("release after reclaim: %v", err)
	}
}

// reclaimHelper runs the helper roles of the reclaim tests:
//   - reopen: envArg increments of the counter file at envOut, each under
//     name on a backend opened for it and closed after, so that its file
//     is idle between them; reports "tokens N:TOKEN,…" as counter does.
//   - gc: reclaims the directory in a loop until stdin ends, then reports
//     "removed N".
func reclaimHelper(role string) error {
	dir := os.Getenv(envDir)
	switch role {
	case "reopen":
		k, _ := strconv.Atoi(os.Getenv(envArg))
		var log []string
		for range k {
			b, err := file.Open(dir, &file.Config{Recheck: time.Minute})
			if err != nil {
				return err
			}
			l, err := sema.New(b).Mutex(os.Getenv(envName)).Acquire(context.Background())
			if err != nil {
				return err
			}
			n, err := bumpCounter(os.Getenv(envOut))
			if err != nil {
				return err
			}
			log = append(log, fmt.Sprintf("%d:%d", n, l.Token()))
			if err := l.Release(context.Background()); err != nil {
				return err
			}
			if err := b.Close(); err != nil {
				return err
			}
		}
		fmt.Printf("tokens %s\n", strings.Join(log, ","))
	case "gc":
		b, err := file.Open(dir, nil)
		if err != nil {
			return err
		}
		stop := make(chan struct{})
		go func() {
			bufio.NewScanner(os.Stdin).Scan()
			close(stop)
		}()
		fmt.Println("started 1")
		total := 0
		for { // at least one reclaim, however early the stop comes
			n, err := b.Reclaim(context.Background(), 0)
			if err != nil {
				return err
			}
			total += n
			select {
			case <-stop:
				fmt.Printf("removed %d\n", total)
				return b.Close()
			default:
			}
		}
	}
	return nil
}

// A reclaim racing acquisitions in other processes loses nothing: P
// processes increment a counter under one name, each increment on a fresh
// backend (so the name's file is idle between them), while another process
// reclaims the directory in a loop. The count is exact, and tokens grow
// with the counter, across the files the name had.
func TestReclaimRacesAcquire(t *testing.T) {
	const p, k = 4, 100
	dir := t.TempDir()
	counter := filepath.Join(t.TempDir(), "counter")
	if err := os.WriteFile(counter, []byte("0"), 0o600); err != nil {
		t.Fatal(err)
	}
	gc := startHelper(t, "gc", envDir+"="+dir)
	gc.expect("started", 30*time.Second)
	var hs []*helper
	for range p {
		hs = append(hs, startHelper(t, "reopen", envDir+"="+dir, envName+"=counter",
			envArg+"="+strconv.Itoa(k), envOut+"="+counter))
	}
	tokens := make(map[int]uint64)
	for _, h := range hs {
		f := h.expect("tokens", 2*time.Minute)
		for _, pair := range strings.Split(f[0], ",") {
			n, tok, _ := strings.Cut(pair, ":")
			ni := int(atoi64(t, n))
			if _, dup := tokens[ni]; dup {
				t.Fatalf("counter value %d read twice: two holders at once", ni)
			}
			tokens[ni] = uint64(atoi64(t, tok))
		}
		if err := h.wait(time.Minute); err != nil {
			t.Fatalf("helper: %v", err)
		}
	}
	fmt.Fprintln(gc.stdin, "stop")
	removed := atoi64(t, gc.expect("removed", time.Minute)[0])
	data, _ := os.ReadFile(counter)
	if got := strings.TrimSpace(string(data)); got != strconv.Itoa(p*k) {
		t.Fatalf("counter = %s, want %d", got, p*k)
	}
	var prev uint64
	for n := range p * k {
		if tokens[n] <= prev {
			t.Fatalf("token of increment %d is %d, not above %d", n, tokens[n], prev)
		}
		prev = tokens[n]
	}
	if removed == 0 {
		t.Fatal("the reclaiming process removed nothing: no race was tried")
	}
	t.Logf("%d processes × %d increments; the name's file was reclaimed %d times", p, k, removed)
}
