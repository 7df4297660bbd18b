//go:build linux

package etcd_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sema-dev/sema/internal/testenv"
)

// These tests run the sema binary as separate processes against etcd.

type proc struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	done   chan struct{}
	code   int
}

// startSema starts `sema args...` with the etcd backend of url.
func startSema(t *testing.T, url string, args ...string) *proc {
	t.Helper()
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.Command(testenv.SemaBinary(t), args...)
	p.cmd.Env = append(os.Environ(), "SEMA_BACKEND="+url)
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.code = 128 + int(ws.Signal())
			}
		} else if err != nil {
			p.code = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(d):
		t.Fatalf("%v still running after %v; stderr: %s", p.cmd.Args, d, p.stderr.String())
		return -1
	}
}

// waitFile waits until path exists and returns its content.
func waitFile(t *testing.T, path string, p *proc) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b))
		}
		if p != nil {
			select {
			case <-p.done:
				t.Fatalf("%v exited (%d) before writing %s; stderr: %s", p.cmd.Args, p.code, path, p.stderr.String())
			default:
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never written", path)
	return ""
}

// waitQueued waits until name (under prefix) has n waiters, as Describe
// shows.
func waitQueued(t *testing.T, c *testenv.EtcdCluster, prefix, name string, n int) {
	t.Helper()
	b := open(t, c, prefix)
	defer b.Close()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		st, err := b.Describe(context.Background(), name)
		if err == nil && len(st.Waiters) >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%q never showed %d waiters", name, n)
}

// TestProcessCounter is the exclusion test across processes: P sema run
// processes at a time, K runs each, every run reading, incrementing and
// writing a counter file under the lock, and recording the value it read
// with its fencing token. The counter ends at exactly P×K, and sorted by the
// value read, the tokens are strictly increasing.
func TestProcessCounter(t *testing.T) {
	const p, k = 4, 10
	c := testenv.SharedEtcd(t)
	url := c.URL() + "/proc"
	dir := t.TempDir()
	counter, log := filepath.Join(dir, "counter"), filepath.Join(dir, "log")
	if err := os.WriteFile(counter, []byte("0"), 0o600); err != nil {
		t.Fatal(err)
	}
	script := `v=$(cat ` + counter + `); echo $((v+1)) > ` + counter + `; echo "$v $SEMA_TOKEN" >> ` + log
	start := time.Now()
	var wg sync.WaitGroup
	for range p {
		wg.Go(func() {
			for range k {
				pr := startSema(t, url, "run", "counter", "--", "sh", "-c", script)
				if code := pr.wait(t, 2*time.Minute); code != 0 {
					t.Errorf("sema run: exit %d; stderr: %s", code, pr.stderr.String())
					return
				}
			}
		})
	}
	wg.Wait()
	data, _ := os.ReadFile(counter)
	if got := strings.TrimSpace(string(data)); got != strconv.Itoa(p*k) {
		t.Fatalf("counter = %s, want %d", got, p*k)
	}
	lines, _ := os.ReadFile(log)
	type run struct{ v, token uint64 }
	var runs []run
	for _, l := range strings.Split(strings.TrimSpace(string(lines)), "\n") {
		f := strings.Fields(l)
		v, _ := strconv.ParseUint(f[0], 10, 64)
		tok, _ := strconv.ParseUint(f[1], 10, 64)
		runs = append(runs, run{v, tok})
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].v < runs[j].v })
	for i := 1; i < len(runs); i++ {
		if runs[i].token <= runs[i-1].token {
			t.Fatalf("token %d after %d (values %d, %d): not increasing", runs[i].token, runs[i-1].token, runs[i].v, runs[i-1].v)
		}
	}
	t.Logf("%d processes × %d runs in %v", p, k, time.Since(start).Round(time.Millisecond))
}

// TestKilledHolderFreesWithinTTL: kill -9 of the sema run process that
// holds the lease (the supervisor of the job) and of its front: nobody is
// left to release, and the waiting sema run gets in once etcd expires the
// lease: its etcd lease lasts the TTL plus a second, and etcd checks
// expiries every 500ms, so within TTL + 2s of the kill.
func TestKilledHolderFreesWithinTTL(t *testing.T) {
	const ttl = 2 * time.Second
	const etcdLife = ttl + time.Second // the TTL in whole seconds, plus one
	c := testenv.SharedEtcd(t)
	url := c.URL() + "/proc"
	dir := t.TempDir()
	ready, granted := filepath.Join(dir, "ready"), filepath.Join(dir, "granted")
	holder := startSema(t, url, "run", "--ttl", ttl.String(), "k9", "--", "sh", "-c", "echo $PPID > "+ready+"; exec sleep 100")
	sup, _ := strconv.Atoi(waitFile(t, ready, holder))
	waiter := startSema(t, url, "run", "--wait", "60s", "k9", "--", "sh", "-c", "date +%s%N > "+granted)
	waitQueued(t, c, "proc", "k9", 1)
	killed := time.Now()
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = holder.cmd.Process.Kill()
	if code := waiter.wait(t, time.Minute); code != 0 {
		t.Fatalf("waiter: exit %d; stderr: %s", code, waiter.stderr.String())
	}
	ns, _ := strconv.ParseInt(waitFile(t, granted, nil), 10, 64)
	after := time.Unix(0, ns).Sub(killed)
	if after > etcdLife+time.Second {
		t.Fatalf("the waiter got in %v after the kill, more than the etcd lease's %v + 1s", after, etcdLife)
	}
	t.Logf("kill -9 → grant: %v (TTL %v)", after.Round(time.Millisecond), ttl)
}

// TestStoppedHolderLosesLease: the sema run holding the lock is frozen
// (SIGSTOP) past its TTL; another sema run gets in meanwhile; when the
// frozen one resumes it ends its job (SIGTERM) and exits 76, lease lost.
func TestStoppedHolderLosesLease(t *testing.T) {
	c := testenv.SharedEtcd(t)
	url := c.URL() + "/proc"
	dir := t.TempDir()
	ready, term := filepath.Join(dir, "ready"), filepath.Join(dir, "term")
	// A TTL of 3s gives the job 300ms (ttl/10) between SIGTERM and SIGKILL
	// to write its marker, even on a loaded machine.
	holder := startSema(t, url, "run", "--ttl", "3s", "frozen", "--", "sh", "-c",
		"trap 'echo TERM > "+term+"; exit 0' TERM; echo $PPID > "+ready+"; while :; do sleep 0.05; done")
	sup, _ := strconv.Atoi(waitFile(t, ready, holder))
	if err := syscall.Kill(sup, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	second := startSema(t, url, "run", "--wait", "60s", "frozen", "--", "true")
	code := second.wait(t, time.Minute)
	stillStopped := isStopped(sup)
	if err := syscall.Kill(sup, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("second holder: exit %d; stderr: %s", code, second.stderr.String())
	}
	if !stillStopped {
		t.Fatal("the frozen holder resumed before the second one got in")
	}
	if code := holder.wait(t, time.Minute); code != 76 {
		t.Fatalf("frozen holder: exit %d, want 76 (lease lost); stderr: %s", code, holder.stderr.String())
	}
	if b, _ := os.ReadFile(term); strings.TrimSpace(string(b)) != "TERM" {
		t.Fatalf("the frozen holder's job did not get SIGTERM (marker %q)", b)
	}
}

// isStopped reports whether process pid is stopped (state T).
func isStopped(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && (f[0] == "T" || f[0] == "t")
}
