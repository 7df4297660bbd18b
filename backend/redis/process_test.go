package redis_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/remote"
	"github.com/sema-dev/sema/internal/testenv"
)

// These tests run the sema binary as separate processes against Redis.

// semaRun runs sema with args to completion.
func semaRun(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.SemaBinary(t), args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("sema %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

// lockedBuffer is a buffer a process writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// semaStart starts sema in the background; it is killed when the test ends.
func semaStart(t *testing.T, args ...string) (*exec.Cmd, *lockedBuffer, chan struct{}) {
	t.Helper()
	cmd := exec.Command(testenv.SemaBinary(t), args...)
	e := &lockedBuffer{}
	cmd.Stderr = e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return cmd, e, done
}

// waitFile waits until path holds a line and returns it.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("%s never appeared", path)
	return ""
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !regexp.MustCompile(`\) [ZX] `).Match(b)
}

// TestCrossProcessCounter is the exclusion test with separate processes:
// 6 workers × 10 `sema run` processes each read, increment and write a
// counter file under the lock; it ends at exactly 60.
func TestCrossProcessCounter(t *testing.T) {
	const workers, iters = 6, 10
	url := testenv.SharedRedis(t).URL()
	counter := filepath.Join(t.TempDir(), "counter")
	if err := os.WriteFile(counter, []byte("0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	job := `n=$(cat ` + counter + `); sleep 0.005; echo $((n+1)) > ` + counter
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range iters {
				if _, stderr, code := semaRun(t, "run", "--backend", url, "proc/counter", "--", "sh", "-c", job); code != 0 {
					t.Errorf("sema run: exit %d: %s", code, stderr)
					return
				}
			}
		})
	}
	wg.Wait()
	b, _ := os.ReadFile(counter)
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(workers*iters) {
		t.Fatalf("counter = %s, want %d", got, workers*iters)
	}
}

// TestKilledHolderFreesWithinTTL: the process that holds a lease (the
// supervisor of `sema run`) is killed with SIGKILL and releases nothing;
// a waiter gets the lock within TTL + 1 s, once the job is gone.
func TestKilledHolderFreesWithinTTL(t *testing.T) {
	const ttl = 2 * time.Second
	url := testenv.SharedRedis(t).URL()
	ready := filepath.Join(t.TempDir(), "ready")
	_, stderr, done := semaStart(t, "run", "--backend", url, "--ttl", ttl.String(), "proc/k9", "--",
		"sh", "-c", "echo $PPID $$ > "+ready+"; exec sleep 100")
	var sup, job int
	if _, err := fmt.Sscan(waitFile(t, ready), &sup, &job); err != nil {
		t.Fatal(err)
	}
	granted := make(chan time.Time, 1)
	go func() {
		l, err := sema.New(open(t, url)).Mutex("proc/k9").Acquire(bg(t))
		if err != nil {
			t.Error(err)
			close(granted)
			return
		}
		granted <- time.Now()
		if alive(job) {
			t.Errorf("the waiter got in while the killed holder's job (pid %d) still ran", job)
		}
		_ = l.Release(context.Background())
	}()
	waitQueued(t, open(t, url), "proc/k9", 1)
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = syscall.Kill(job, syscall.SIGKILL) // its supervisor is gone; do not leave it behind
	at, ok := <-granted
	if !ok {
		t.FailNow()
	}
	if d := at.Sub(killed); d > ttl+time.Second {
		t.Fatalf("granted %v after kill -9 of the holder, want within TTL + 1s", d)
	} else {
		t.Logf("granted %v after kill -9 of the holder (TTL %v)", d, ttl)
	}
	<-done
	_ = stderr
}

// TestFrozenHolderLosesFirst: the holder is frozen (SIGSTOP) past its TTL;
// another sema run gets in; the frozen one, once thawed, finds its lease
// lost, terminates its job and exits 76.
func TestFrozenHolderLosesFirst(t *testing.T) {
	url := testenv.SharedRedis(t).URL()
	dir := t.TempDir()
	ready, term := filepath.Join(dir, "ready"), filepath.Join(dir, "term")
	holder, stderr, done := semaStart(t, "run", "--backend", url, "--ttl", "1s", "proc/frozen", "--", "sh", "-c",
		"trap 'echo TERM > "+term+"; exit 0' TERM; echo $PPID > "+ready+"; while :; do sleep 0.05; done")
	sup, _ := strconv.Atoi(waitFile(t, ready))
	if err := syscall.Kill(sup, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := semaRun(t, "run", "--backend", url, "--wait", "30s", "proc/frozen", "--", "true")
	_ = syscall.Kill(sup, syscall.SIGCONT)
	if code != 0 {
		t.Fatalf("second holder: exit %d: %s", code, errOut)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the thawed holder did not exit")
	}
	if c := holder.ProcessState.ExitCode(); c != 76 {
		t.Fatalf("thawed holder: exit %d, want 76 (lease lost); stderr: %s", c, stderr)
	}
	if b, _ := os.ReadFile(term); strings.TrimSpace(string(b)) != "TERM" {
		t.Fatalf("the job did not get SIGTERM (%q)", b)
	}
}

// TestServeGateway runs `sema serve --backend redis://…`, a stateless
// gateway in front of Redis: a remote client acquires, waits and releases
// through it; `sema ls`, `status` and `release --force` reach Redis
// directly.
func TestServeGateway(t *testing.T) {
	url := testenv.SharedRedis(t).URL()
	_, serveErr, _ := semaStart(t, "serve", "--listen", "127.0.0.1:0", "--backend", url)
	var addr string
	for deadline := time.Now().Add(30 * time.Second); addr == ""; time.Sleep(10 * time.Millisecond) {
		if m := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(serveErr.String()); m != nil {
			addr = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("sema serve did not listen: %s", serveErr)
		}
	}
	rb, err := remote.New(remote.Config{URL: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	c := sema.New(rb)
	defer c.Close()
	const name = "gw/lock"
	l, err := c.Mutex(name).Acquire(bg(t), sema.WithOwner("via-gateway"))
	if err != nil {
		t.Fatal(err)
	}
	// A waiter through the gateway, granted when the holder releases.
	got := make(chan *sema.Lease, 1)
	go func() {
		l2, err := c.Mutex(name).Acquire(bg(t), sema.WithOwner("gateway-waiter"))
		if err != nil {
			t.Error(err)
		}
		got <- l2
	}()
	waitQueued(t, open(t, url), name, 1)
	out, errOut, code := semaRun(t, "status", "--backend", url, name)
	if code != 0 || !strings.Contains(out, "via-gateway") || !strings.Contains(out, "gateway-waiter") {
		t.Fatalf("sema status: exit %d\n%s%s", code, out, errOut)
	}
	if err := l.Release(bg(t)); err != nil {
		t.Fatal(err)
	}
	l2 := <-got
	if l2 == nil || l2.Token() <= l.Token() {
		t.Fatalf("hand-off through the gateway: %v", l2)
	}
	out, errOut, code = semaRun(t, "ls", "--backend", url)
	if code != 0 || !strings.Contains(out, name) {
		t.Fatalf("sema ls: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code = semaRun(t, "release", "--backend", url, "--force", name); code != 0 {
		t.Fatalf("sema release --force: exit %d\n%s%s", code, out, errOut)
	}
	if err := l2.Refresh(bg(t)); err == nil {
		t.Fatal("the force-released lease still renews through the gateway")
	}
	if st, err := open(t, url).Describe(bg(t), name); err != nil || len(st.Holders) != 0 {
		t.Fatalf("after release --force: %+v, %v", st, err)
	}
}
