//go:build linux

package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

// TestInspectAndRelease: ls, status and release --force on a name held by
// two sema run processes and waited for by a third.
func TestInspectAndRelease(t *testing.T) {
	t.Parallel()
	be, dir := fileBackend(t), t.TempDir()
	var holders []*started
	for _, owner := range []string{"alice nightly", "bob nightly"} {
		ready := filepath.Join(dir, "ready"+owner[:1])
		h := startSema(t, be, "run", "--limit", "2", "--ttl", "1s", "--owner", owner, "team/report", "--", "sh", "-c",
			"echo $SEMA_LEASE_ID > "+ready+"; exec sleep 100")
		waitFile(t, ready, h)
		holders = append(holders, h)
	}
	waiter := startSema(t, be, "run", "--limit", "2", "--weight", "2", "--owner", "carol", "team/report", "--", "true")
	waitQueued(t, be, "team/report", 1)

	out, stderr, code := runSema(t, be, "ls")
	if code != 0 {
		t.Fatalf("ls: exit %d: %s", code, stderr)
	}
	t.Logf("sema ls:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("ls: want a header and one row, got %q", out)
	}
	if f := strings.Fields(lines[1]); len(f) < 5 || f[0] != "team/report" || f[1] != "2/2" || f[2] != "2" || f[3] != "1" || f[4] != "alice" {
		t.Fatalf("ls row %q", lines[1])
	}
	if out, _, _ := runSema(t, be, "ls", "other/"); !strings.Contains(out, "no semaphores held") {
		t.Fatalf("ls other/: %q", out)
	}

	out, stderr, code = runSema(t, be, "status", "team/report")
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	t.Logf("sema status:\n%s", out)
	for _, want := range []string{"2/2 used, 2 holder(s), 1 waiter(s)", "alice nightly", "bob nightly", "carol"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q", want)
		}
	}
	out, _, code = runSema(t, be, "status", "--json", "team/report")
	var st sema.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 {
		t.Fatalf("status --json: %v (exit %d): %q", err, code, out)
	}
	if st.Name != "team/report" || st.Limit != 2 || st.Used != 2 || len(st.Holders) != 2 || len(st.Waiters) != 1 || st.Waiters[0].Weight != 2 {
		t.Fatalf("status --json: %+v", st)
	}
	if out, _, code := runSema(t, be, "status", "nobody/holds/this"); code != 0 || !strings.Contains(out, "not held") {
		t.Fatalf("status of a free name: exit %d %q", code, out)
	}

	// release: --force is required; a wrong lease ID releases nothing.
	if _, stderr, code := runSema(t, be, "release", "team/report"); code != ExitUsage || !strings.Contains(stderr, "--force") {
		t.Fatalf("release without --force: exit %d %q", code, stderr)
	}
	if _, stderr, code := runSema(t, be, "release", "--force", "--lease", "NOSUCHLEASE", "team/report"); code != ExitFailure || !strings.Contains(stderr, "nothing released") {
		t.Fatalf("release of an unknown lease: exit %d %q", code, stderr)
	}
	// Release alice's lease only: her job is terminated; bob keeps his.
	alice := strings.TrimSpace(waitFile(t, filepath.Join(dir, "readya"), nil))
	out, stderr, code = runSema(t, be, "release", "--force", "--lease", alice, "team/report")
	if code != 0 || !strings.Contains(out, alice) || !strings.Contains(out, "alice nightly") {
		t.Fatalf("release --lease: exit %d, out %q, err %q", code, out, stderr)
	}
	t.Logf("sema release --force --lease: %s", out)
	if code := holders[0].wait(t, 30*time.Second); code != ExitLeaseLost {
		t.Fatalf("alice's sema run: exit %d, want %d", code, ExitLeaseLost)
	}
	select {
	case <-holders[1].done:
		t.Fatalf("bob's sema run ended too: %s", holders[1].stderr)
	default:
	}
	// Release everything: bob's job ends, then carol (weight 2) gets in.
	if out, _, code := runSema(t, be, "release", "--force", "team/report"); code != 0 || !strings.Contains(out, "bob nightly") {
		t.Fatalf("release all: exit %d %q", code, out)
	}
	if code := holders[1].wait(t, 30*time.Second); code != ExitLeaseLost {
		t.Fatalf("bob's sema run: exit %d", code)
	}
	if code := waiter.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("carol: exit %d: %s", code, waiter.stderr)
	}
	if _, stderr, code := runSema(t, be, "release", "--force", "team/report"); code != ExitFailure || !strings.Contains(stderr, "not held") {
		t.Fatalf("release of a free name: exit %d %q", code, stderr)
	}
}

func TestInspectUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"ls", "a", "b"},
		{"ls", "--nope"},
		{"status"},
		{"status", "a", "b"},
		{"status", "bad\x01name"},
		{"release", "--force"},
		{"release", "--force", "--lease", "bad id!", "x"},
	} {
		if _, stderr, code := runSema(t, fileBackend(t), args...); code != ExitUsage || stderr == "" {
			t.Errorf("%q: exit %d, stderr %q", args, code, stderr)
		}
	}
	if _, stderr, code := runSema(t, "bogus://x", "ls"); code != ExitUsage || !strings.Contains(stderr, "unknown scheme") {
		t.Errorf("bad backend: exit %d %q", code, stderr)
	}
}
