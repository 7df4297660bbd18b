//go:build linux

package etcd_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/remote"
	"github.com/sema-dev/sema/internal/testenv"
)

// startServe starts `sema serve --backend url` on a free loopback port and
// returns its URL.
func startServe(t *testing.T, url string) string {
	t.Helper()
	cmd := exec.Command(testenv.SemaBinary(t), "serve", "--listen", "127.0.0.1:0", "--backend", url)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`url=(http://[0-9.:]+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case u := <-found:
		return u
	case <-time.After(60 * time.Second):
		t.Fatal("sema serve never said where it listens")
		return ""
	}
}

// TestServeGateway: two `sema serve --backend etcd://…` processes are
// stateless gateways to one etcd: a lease taken through one holds against
// a waiter of the other, which gets in when it is released. sema ls,
// status and release --force work on the etcd URL directly.
func TestServeGateway(t *testing.T) {
	c := testenv.SharedEtcd(t)
	url := c.URL() + "/gateway"
	a, b := startServe(t, url), startServe(t, url)
	ctx := context.Background()
	clientOf := func(u string) *sema.Client {
		rb, err := remote.New(remote.Config{URL: u})
		if err != nil {
			t.Fatal(err)
		}
		cl := sema.New(rb)
		t.Cleanup(func() { _ = cl.Close() })
		return cl
	}
	ca, cb := clientOf(a), clientOf(b)
	l, err := ca.Mutex("gw").Acquire(ctx, sema.WithOwner("through-a"))
	if err != nil {
		t.Fatalf("Acquire through %s: %v", a, err)
	}
	if _, err := cb.Mutex("gw").TryAcquire(ctx); err == nil {
		t.Fatal("TryAcquire through the other gateway succeeded while held")
	}
	got := make(chan *sema.Lease, 1)
	go func() {
		l, err := cb.Mutex("gw").Acquire(ctx, sema.WithOwner("through-b"))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitQueued(t, c, "gateway", "gw", 1)

	// The CLI, on etcd directly.
	out, err := exec.Command(testenv.SemaBinary(t), "status", "--json", "--backend", url, "gw").Output()
	if err != nil {
		t.Fatalf("sema status: %v", err)
	}
	var st sema.Status
	if err := json.Unmarshal(out, &st); err != nil || len(st.Holders) != 1 || st.Holders[0].Owner != "through-a" || len(st.Waiters) != 1 {
		t.Fatalf("sema status --json = %s (%v)", out, err)
	}
	out, err = exec.Command(testenv.SemaBinary(t), "ls", "--backend", url).Output()
	if err != nil || !strings.Contains(string(out), "gw") {
		t.Fatalf("sema ls: %v\n%s", err, out)
	}

	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lb := <-got
	if lb == nil {
		t.FailNow()
	}
	if lb.Token() <= l.Token() {
		t.Fatalf("token %d through b after %d through a", lb.Token(), l.Token())
	}
	out, err = exec.Command(testenv.SemaBinary(t), "release", "--force", "--backend", url, "gw").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "released") {
		t.Fatalf("sema release --force: %v\n%s", err, out)
	}
	if err := lb.Refresh(ctx); !errors.Is(err, sema.ErrForceReleased) {
		t.Fatalf("Refresh of the force-released lease: %v, want ErrForceReleased", err)
	}
}
