package remote_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/testenv"
)

// TestCLIAgainstServer drives sema run, ls, status and release (the built
// binary) against a server, next to a lease held through the Go client.
func TestCLIAgainstServer(t *testing.T) {
	srv := startServer(t)
	b := newBackend(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	be := "--backend=" + srv.URL
	const name = "cli/lock"

	held, err := b.TryAcquire(ctx, sema.Request{Name: name, ID: "heldbygo", Owner: "go-holder", Limit: 1, Weight: 1, TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	runSema := func(t *testing.T, args ...string) (stdout, stderr string, code int) {
		t.Helper()
		stdout, stderr, code, err := testenv.RunSema(t, ctx, nil, args...)
		if err != nil {
			t.Fatal(err)
		}
		return stdout, stderr, code
	}

	t.Run("run --no-wait while held", func(t *testing.T) {
		_, stderr, code := runSema(t, "run", be, "--no-wait", name, "--", "true")
		if code != 75 {
			t.Fatalf("exit %d, want 75 (not acquired); stderr: %s", code, stderr)
		}
		if !strings.Contains(stderr, "go-holder") {
			t.Errorf("stderr does not name the holder: %s", stderr)
		}
	})
	t.Run("status", func(t *testing.T) {
		stdout, stderr, code := runSema(t, "status", be, name)
		if code != 0 || !strings.Contains(stdout, "go-holder") || !strings.Contains(stdout, strconv.FormatUint(held.Token, 10)) {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
		}
	})
	t.Run("ls", func(t *testing.T) {
		stdout, stderr, code := runSema(t, "ls", be)
		if code != 0 || !strings.Contains(stdout, name) {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
		}
	})
	t.Run("release (force)", func(t *testing.T) {
		stdout, stderr, code := runSema(t, "release", be, "--force", name)
		if code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
		}
		if _, err := b.Renew(ctx, name, held.ID, 30*time.Second); !errors.Is(err, sema.ErrForceReleased) {
			t.Fatalf("renew after force-release: %v", err)
		}
	})
	t.Run("run", func(t *testing.T) {
		stdout, stderr, code := runSema(t, "run", be, name, "--", "sh", "-c", `echo "token=$SEMA_TOKEN name=$SEMA_NAME"`)
		if code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
		}
		m := regexp.MustCompile(`token=(\d+) name=(.*)`).FindStringSubmatch(stdout)
		if m == nil || m[2] != name {
			t.Fatalf("child saw %q", stdout)
		}
		if tok, _ := strconv.ParseUint(m[1], 10, 64); tok <= held.Token {
			t.Fatalf("token %d after %d", tok, held.Token)
		}
		st, err := b.Describe(ctx, name)
		if err != nil || len(st.Holders) != 0 {
			t.Fatalf("after sema run: %+v %v", st, err)
		}
	})
	t.Run("run waits for a release", func(t *testing.T) {
		g, err := b.TryAcquire(ctx, sema.Request{Name: name, ID: "second", Owner: "go-holder", Limit: 1, Weight: 1, TTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		type out struct {
			stdout, stderr string
			code           int
			err            error
		}
		done := make(chan out, 1)
		go func() {
			o, e, c, err := testenv.RunSema(t, ctx, nil, "run", be, "--wait=30s", name, "--", "sh", "-c", `echo "token=$SEMA_TOKEN"`)
			done <- out{o, e, c, err}
		}()
		testenv.WaitFor(t, "the waiter queued", func() bool {
			st, err := b.Describe(ctx, name)
			return err == nil && len(st.Waiters) == 1
		})
		if err := b.Release(ctx, name, g.ID); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.code != 0 || !strings.Contains(r.stdout, "token=") {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
	})
}
