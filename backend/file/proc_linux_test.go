package file_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

// P processes × K increments of a counter file, each under the lock: a
// lost update would show as a total below P×K. Each increment also
// records its fencing token: sorted by the counter value read, tokens must
// be strictly increasing (the order of the critical sections).
func TestProcessCounter(t *testing.T) {
	const p, k = 8, 200
	dir := t.TempDir()
	counter := filepath.Join(t.TempDir(), "counter")
	if err := os.WriteFile(counter, []byte("0"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var hs []*helper
	for range p {
		hs = append(hs, startHelper(t, "counter", envDir+"="+dir, envName+"=counter",
			envArg+"="+strconv.Itoa(k), envOut+"="+counter))
	}
	tokens := make(map[int]uint64) // counter value read → token
	for _, h := range hs {
		f := h.expect("tokens", 2*time.Minute)
		var last uint64
		for _, pair := range strings.Split(f[0], ",") {
			n, tok, _ := strings.Cut(pair, ":")
			ni, tk := int(atoi64(t, n)), uint64(atoi64(t, tok))
			if _, dup := tokens[ni]; dup {
				t.Fatalf("counter value %d read twice: two holders at once", ni)
			}
			if tk <= last {
				t.Fatalf("process tokens not increasing: %d after %d", tk, last)
			}
			tokens[ni], last = tk, tk
		}
		if err := h.wait(time.Minute); err != nil {
			t.Fatalf("helper: %v", err)
		}
	}
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
	t.Logf("%d processes × %d increments in %v", p, k, time.Since(start).Round(time.Millisecond))
}

// waitQueued waits until name has n waiters, as seen by Describe.
func waitQueued(t testing.TB, dir, name string, n int) {
	t.Helper()
	b := open(t, dir)
	defer b.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := b.Describe(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Waiters) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q: %d waiters after 30s, want %d", name, len(st.Waiters), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A holder killed with SIGKILL frees the lock at once: the waiter (woken
// only by events: its Recheck is a minute) is granted long before the
// holder's 30s TTL.
func TestKilledHolderFreesAtOnce(t *testing.T) {
	dir := t.TempDir()
	env := []string{envDir + "=" + dir, envName + "=job"}
	holder := startHelper(t, "hold", append(env, envTTL+"=30s")...)
	f := holder.expect("acquired", 30*time.Second)
	expires := atoi64(t, f[1])
	waiter := startHelper(t, "wait", append(env, envWait+"=5s")...)
	waitQueued(t, dir, "job", 1)

	killed := time.Now()
	if err := holder.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	g := waiter.expect("granted", 10*time.Second)
	granted := atoi64(t, g[0])
	if left := time.Duration(expires - granted); left < 20*time.Second {
		t.Fatalf("granted only %v before the dead holder's expiry", left)
	}
	if err := waiter.wait(time.Minute); err != nil {
		t.Fatalf("waiter: %v", err)
	}
	t.Logf("kill → grant: %v (TTL left: %v)", time.Unix(0, granted).Sub(killed), time.Duration(expires-granted))
}

// A holder frozen with SIGSTOP keeps its liveness lock but stops renewing:
// it loses the lease at its TTL. The waiter must be granted while the
// holder is still stopped, and never before the holder's own local
// deadline: mark + TTL − margin bounds that deadline from above (mark is
// taken before the last confirmed grant or renewal was sent), and both
// sides read the host's wall clock. After SIGCONT the holder's lease must
// report ErrExpired.
func TestStoppedHolderLosesLeaseAtTTL(t *testing.T) {
	const ttl = time.Second
	const margin = ttl / 5 // the helpers' safety margin
	dir := t.TempDir()
	marks := filepath.Join(t.TempDir(), "marks")
	env := []string{envDir + "=" + dir, envName + "=job", envTTL + "=" + ttl.String()}
	holder := startHelper(t, "stophold", append(env, envOut+"="+marks)...)
	holder.expect("acquired", 30*time.Second)
	waiter := startHelper(t, "wait", append(env, envWait+"=20s")...)
	waitQueued(t, dir, "job", 1)
	time.Sleep(ttl / 2) // let a renewal or two happen: stop mid-lease

	pid := holder.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, pid)
	g := waiter.expect("granted", 20*time.Second)
	granted := atoi64(t, g[0])
	if !stopped(t, pid) {
		t.Fatal("holder resumed before the waiter was granted")
	}
	data, err := os.ReadFile(marks)
	if err != nil || len(data) < 8 {
		t.Fatalf("marks: %v", err)
	}
	deadline := int64(binary.LittleEndian.Uint64(data)) + int64(ttl-margin)
	if granted <= deadline {
		t.Fatalf("waiter granted %v before the holder's local deadline", time.Duration(deadline-granted))
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	d := holder.expect("done", 20*time.Second)
	if d[1] != "true" {
		t.Fatalf("holder's lease ended with %s, want sema.ErrExpired", strings.Join(d[2:], " "))
	}
	t.Logf("waiter granted %v after the holder's latest possible local deadline", time.Duration(granted-deadline))
}

func stopped(t *testing.T, pid int) bool {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ...: comm may contain spaces; the state follows the last ')'.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && (f[0] == "T" || f[0] == "t")
}

func waitStopped(t *testing.T, pid int) {
	t.Helper()
	for range 2000 {
		if stopped(t, pid) {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("process did not stop")
}

// A waiter whose grant is force-released before it sees it (its process
// stopped meanwhile) fails with sema.ErrForceReleased when it runs again,
// even after that grant expired: it is not granted the same lease ID anew,
// which would undo the force-release.
func TestForceReleasedBeforeSeen(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir)
	c := sema.New(b)
	l, err := c.Mutex("job").Acquire(context.Background(), sema.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	waiter := startHelper(t, "wait", envDir+"="+dir, envName+"=job", envTTL+"=1s", envWait+"=30s")
	waitQueued(t, dir, "job", 1)
	pid := waiter.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, pid)
	if err := l.Release(context.Background()); err != nil { // the grant goes to the stopped waiter
		t.Fatal(err)
	}
	hs, err := b.ForceRelease(context.Background(), "job", "", sema.ForceOptions{})
	if err != nil || len(hs) != 1 {
		t.Fatalf("ForceRelease = %+v, %v; want the stopped waiter's grant", hs, err)
	}
	time.Sleep(1500 * time.Millisecond) // past that grant's expiry
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	f := waiter.expect("error", 20*time.Second)
	if msg := strings.Join(f, " "); !strings.Contains(msg, sema.ErrForceReleased.Error()) {
		t.Fatalf("waiter: %s; want its acquire to fail as force-released", msg)
	}
}
