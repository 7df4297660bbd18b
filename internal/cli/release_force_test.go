//go:build linux

package cli

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema/internal/testenv"
)

// serveBackend starts a sema serve process and returns its URL.
func serveBackend(t *testing.T) string {
	t.Helper()
	return testenv.StartSema(t, testenv.SemaOptions{}).URL
}

// TestForceReleaseNoOverlap: a job started right after `sema release
// --force` never runs beside the job whose lease was force-released, which
// goes on until its sema run learns of it; that sema run exits 76 and says
// who ended it.
func TestForceReleaseNoOverlap(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backend func(*testing.T) string
	}{{"file", fileBackend}, {"http", serveBackend}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			be, dir := tc.backend(t), t.TempDir()
			ready := filepath.Join(dir, "ready")
			// The old job goes on a while after its SIGTERM (within sema
			// run's grace, ttl/10).
			holder := startSema(t, be, "run", "--ttl", "3s", "nightly", "--", "sh", "-c",
				"trap 'sleep 0.1; exit 0' TERM; echo $$ > "+ready+"; while :; do sleep 0.05; done")
			pid := strings.TrimSpace(waitFile(t, ready, holder))
			stdout, stderr, code := runSema(t, be, "release", "--force", "nightly")
			if code != 0 || !strings.Contains(stdout, "its permits free at") {
				t.Fatalf("release --force: exit %d, stdout %q, stderr %q", code, stdout, stderr)
			}
			_, stderr, code = runSema(t, be, "run", "--wait", "30s", "nightly", "--", "sh", "-c",
				"if kill -0 "+pid+" 2>/dev/null; then echo 'the old job still runs' >&2; exit 3; fi")
			if code != 0 {
				t.Fatalf("the next job: exit %d (3: it ran beside the old one); stderr %q", code, stderr)
			}
			if code := holder.wait(t, 30*time.Second); code != ExitLeaseLost {
				t.Fatalf("old holder: exit %d, want %d; stderr: %s", code, ExitLeaseLost, holder.stderr)
			}
			if !strings.Contains(holder.stderr.String(), "force-released by an operator") {
				t.Errorf("old holder's stderr should say it was force-released: %q", holder.stderr)
			}
		})
	}
}

// TestForceReleaseNow: with --now the permits are free at once: a waiter
// gets in although the old holder, with a long TTL, has not yet learned.
func TestForceReleaseNow(t *testing.T) {
	t.Parallel()
	be, dir := fileBackend(t), t.TempDir()
	ready := filepath.Join(dir, "ready")
	holder := startSema(t, be, "run", "--ttl", "30s", "stuck", "--", "sh", "-c", "echo $$ > "+ready+"; exec sleep 100")
	waitFile(t, ready, holder)
	if _, stderr, code := runSema(t, be, "run", "--wait", "1s", "stuck", "--", "true"); code != ExitNotAcquired {
		t.Fatalf("while held: exit %d, want %d; stderr %q", code, ExitNotAcquired, stderr)
	}
	stdout, stderr, code := runSema(t, be, "release", "--force", "--now", "stuck")
	if code != 0 || !strings.Contains(stdout, "its permits are free now") {
		t.Fatalf("release --force --now: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// The old holder renews every 10s: it cannot have learned yet.
	if _, stderr, code := runSema(t, be, "run", "--wait", "5s", "stuck", "--", "true"); code != 0 {
		t.Fatalf("after --now: exit %d; stderr %q", code, stderr)
	}
	if code := holder.wait(t, 60*time.Second); code != ExitLeaseLost {
		t.Fatalf("old holder: exit %d, want %d; stderr: %s", code, ExitLeaseLost, holder.stderr)
	}
}
