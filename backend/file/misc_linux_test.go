package file_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/file"
	"golang.org/x/sys/unix"
)

func TestOpenURL(t *testing.T) {
	dir := t.TempDir()
	b, err := sema.Open(context.Background(), "file://"+dir+"/locks")
	if err != nil {
		t.Fatalf("file://%s/locks: %v", dir, err)
	}
	if got := b.(*file.Backend).Dir(); got != dir+"/locks" {
		t.Errorf("Dir() = %q", got)
	}
	b.Close()
	for _, u := range []string{"file://", "file:relative/dir", "file://host/dir", "file://./dir",
		"file://user@/dir", "file:///tmp/x?sync=1"} {
		if b, err := sema.Open(context.Background(), u); !errors.Is(err, sema.ErrInvalidArgument) || b != nil {
			t.Errorf("sema.Open(%q) = %v, %v; want ErrInvalidArgument", u, b, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	var nilCfg *file.Config
	if err := nilCfg.Validate(); err != nil {
		t.Errorf("nil config: %v", err)
	}
	for _, c := range []file.Config{{Recheck: -1}, {Recheck: time.Hour}, {Poll: 2 * time.Second},
		{IdleClose: time.Millisecond}, {Recheck: 100 * time.Millisecond, Poll: time.Second}} {
		if err := c.Validate(); !errors.Is(err, sema.ErrInvalidArgument) {
			t.Errorf("%+v: Validate = %v", c, err)
		}
		if _, err := file.Open(t.TempDir(), &c); !errors.Is(err, sema.ErrInvalidArgument) {
			t.Errorf("%+v: Open = %v", c, err)
		}
	}
	if _, err := file.Open("", nil); !errors.Is(err, sema.ErrInvalidArgument) {
		t.Errorf("Open(\"\") = %v", err)
	}
	f := filepath.Join(t.TempDir(), "f")
	os.WriteFile(f, nil, 0o600)
	if _, err := file.Open(f, nil); !errors.Is(err, sema.ErrInvalidArgument) {
		t.Errorf("Open(a file) = %v", err)
	}
}

// Describe shows who holds and waits, from the file, across processes.
func TestDescribeAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	env := []string{envDir + "=" + dir, envName + "=job"}
	holder := startHelper(t, "hold", append(env, envTTL+"=30s")...)
	f := holder.expect("acquired", 30*time.Second)
	waiter := startHelper(t, "wait", append(env, envWait+"=30s")...)
	waitQueued(t, dir, "job", 1)
	b := open(t, dir)
	defer b.Close()
	st, err := b.Describe(ctx(t, 5*time.Second), "job")
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if len(st.Holders) != 1 || len(st.Waiters) != 1 || st.Limit != 1 || st.Used != 1 {
		t.Fatalf("status %+v", st)
	}
	h, w := st.Holders[0], st.Waiters[0]
	switch {
	case h.PID != holder.cmd.Process.Pid || h.Host != host || h.Owner != host+":"+strconv.Itoa(h.PID):
		t.Errorf("holder %+v, want pid %d host %q", h, holder.cmd.Process.Pid, host)
	case strconv.FormatUint(h.Token, 10) != f[0] || h.ExpiresAt.UnixNano() != atoi64(t, f[1]) || h.Weight != 1:
		t.Errorf("holder %+v, helper said token %s expires %s", h, f[0], f[1])
	case h.AcquiredAt.After(h.RenewedAt) || !h.RenewedAt.Before(h.ExpiresAt) || h.ID == "":
		t.Errorf("holder times %+v", h)
	case w.PID != waiter.cmd.Process.Pid || w.Host != host || w.Weight != 1 || w.Since.Before(h.AcquiredAt):
		t.Errorf("waiter %+v, want pid %d", w, waiter.cmd.Process.Pid)
	}
	list, err := b.List(ctx(t, 5*time.Second), "j")
	if err != nil || len(list) != 1 || list[0].Name != "job" {
		t.Errorf("List = %+v, %v", list, err)
	}
	// A dead waiter stays in the file until a writer reaps it; Describe,
	// which only reads, leaves it out by its liveness lock.
	waiter.cmd.Process.Signal(syscall.SIGKILL)
	waiter.wait(10 * time.Second)
	st, err = b.Describe(ctx(t, 5*time.Second), "job")
	if err != nil || len(st.Waiters) != 0 || len(st.Holders) != 1 {
		t.Errorf("after the waiter died: %+v, %v", st, err)
	}
}

// A waiter that dies in the queue does not block the ones behind it.
func TestKilledWaiterLeavesQueue(t *testing.T) {
	dir := t.TempDir()
	c := sema.New(open(t, dir))
	defer c.Close()
	l, err := c.Mutex("job").Acquire(ctx(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	env := []string{envDir + "=" + dir, envName + "=job", envWait + "=30s"}
	first := startHelper(t, "wait", env...)
	waitQueued(t, dir, "job", 1)
	second := startHelper(t, "wait", env...)
	waitQueued(t, dir, "job", 2)
	first.cmd.Process.Signal(syscall.SIGKILL)
	first.wait(10 * time.Second)
	if err := l.Release(ctx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	second.expect("granted", 10*time.Second)
}

// A force-release by another backend (an admin's process) ends the lease:
// its next renewal says so.
func TestForceReleaseAcrossBackends(t *testing.T) {
	dir := t.TempDir()
	c1, b2 := sema.New(open(t, dir)), open(t, dir)
	defer c1.Close()
	defer b2.Close()
	l, err := c1.Mutex("job").Acquire(ctx(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	hs, err := b2.ForceRelease(ctx(t, 5*time.Second), "job", "", sema.ForceOptions{Now: true})
	if err != nil || len(hs) != 1 || hs[0].ID != l.ID() {
		t.Fatalf("ForceRelease = %+v, %v", hs, err)
	}
	if err := l.Refresh(ctx(t, 5*time.Second)); !errors.Is(err, sema.ErrForceReleased) {
		t.Fatalf("Refresh after force-release: %v", err)
	}
	if _, err := b2.ForceRelease(ctx(t, 5*time.Second), "job", "", sema.ForceOptions{}); !errors.Is(err, sema.ErrNotHeld) {
		t.Fatalf("second ForceRelease: %v", err)
	}
	if _, err := b2.ForceRelease(ctx(t, 5*time.Second), "never-used", "", sema.ForceOptions{}); !errors.Is(err, sema.ErrNotHeld) {
		t.Fatalf("ForceRelease of an unknown name: %v", err)
	}
}

// Close fails waiting Acquires with ErrClosed; their queue entries die with
// the backend's files.
func TestCloseFailsWaiters(t *testing.T) {
	dir := t.TempDir()
	c1, b2 := sema.New(open(t, dir)), open(t, dir)
	defer c1.Close()
	l, err := c1.Mutex("job").Acquire(ctx(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := sema.New(b2).Mutex("job").Acquire(ctx(t, 30*time.Second))
		errc <- err
	}()
	waitQueued(t, dir, "job", 1)
	b2.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, sema.ErrClosed) {
			t.Fatalf("Acquire after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire still waiting after Close")
	}
	st, _ := c1.Describe(ctx(t, 5*time.Second), "job")
	if len(st.Waiters) != 0 {
		t.Errorf("waiters of a closed backend still listed: %+v", st.Waiters)
	}
	l.Release(context.Background())
}

// After IdleClose without leases or waiters, a backend closes the file and
// its liveness lock is gone.
func TestIdleCloseDropsLivenessLock(t *testing.T) {
	dir := t.TempDir()
	c := sema.New(open(t, dir)) // IdleClose 200ms
	defer c.Close()
	l, err := c.Mutex("job").Acquire(ctx(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	path := stateFile(dir, "job")
	if !slotsHeld(t, path) {
		t.Fatal("no liveness lock while holding")
	}
	l.Release(context.Background())
	deadline := time.Now().Add(10 * time.Second)
	for slotsHeld(t, path) {
		if time.Now().After(deadline) {
			t.Fatal("liveness lock still held 10s after the last release")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func slotsHeld(t *testing.T, path string) bool {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Start: 1 << 40, Len: 1 << 16}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		t.Fatal(err)
	}
	return lk.Type != unix.F_UNLCK
}
