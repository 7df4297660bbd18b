package postgres_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/remote"
)

// `sema serve --backend postgres://…` is a stateless gateway: a remote
// client acquires, waits and releases through it, and sema ls, status and
// release --force work on the database directly, beside it.
func TestServeGateway(t *testing.T) {
	url := shared(t).URL
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	srv := startSema(t, "serve", "--listen", addr, "--backend", url, "--log-level", "warn")
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-srv.done:
			t.Fatalf("sema serve exited: %s", srv.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sema serve did not come up: %v", err)
		}
	}
	rb, err := remote.New(remote.Config{URL: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	c := sema.New(rb, sema.WithLogger(quiet))
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := uniqueName("serve/gateway")

	first, err := c.Mutex(name).Acquire(ctx, sema.WithOwner("through-serve"))
	if err != nil {
		t.Fatalf("acquire through sema serve: %v", err)
	}
	if g := c.Guarantees(); !g.FIFO || !g.DurableFencing || !strings.Contains(g.Notes, "PostgreSQL") {
		t.Errorf("guarantees through the server: %+v", g)
	}
	second := make(chan *sema.Lease, 1)
	go func() {
		l, err := c.Mutex(name).Acquire(ctx, sema.WithOwner("waiting"))
		if err != nil {
			t.Errorf("waiting acquire through sema serve: %v", err)
		}
		second <- l
	}()
	waitQueued(t, open(t, postgresConfig(url)), name, 1)

	out, stderr, code := runSema(t, "status", "--backend", url, name)
	if code != 0 || !strings.Contains(out, "through-serve") || !strings.Contains(out, strconv.FormatUint(first.Token(), 10)) {
		t.Fatalf("sema status: exit %d\n%s%s", code, out, stderr)
	}
	out, stderr, code = runSema(t, "ls", "--backend", url, "serve/")
	if code != 0 || !strings.Contains(out, name) {
		t.Fatalf("sema ls: exit %d\n%s%s", code, out, stderr)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := <-second
	if l2 == nil {
		t.FailNow()
	}
	if l2.Token() <= first.Token() {
		t.Fatalf("token %d after %d", l2.Token(), first.Token())
	}
	out, stderr, code = runSema(t, "release", "--backend", url, "--force", name)
	if code != 0 {
		t.Fatalf("sema release --force: exit %d\n%s%s", code, out, stderr)
	}
	if err := l2.Refresh(ctx); !errors.Is(err, sema.ErrLeaseLost) {
		t.Fatalf("refresh through the server after a force-release: %v", err)
	}
	t.Logf("status, ls and release --force; force-released lease reports %v", l2.Err())
}
