//go:build linux

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sema-dev/sema/internal/testenv"
)

// onFileAndServe runs f as parallel subtests on a file:// directory and on
// a sema serve, each with a directory of its own.
func onFileAndServe(t *testing.T, f func(t *testing.T, be, dir string)) {
	for _, tc := range []struct {
		name    string
		backend func(*testing.T) string
	}{{"file", fileBackend}, {"http", serveBackend}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f(t, tc.backend(t), t.TempDir())
		})
	}
}

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
	onFileAndServe(t, func(t *testing.T, be, dir string) {
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
		// By whom: "an operator" if it learned at a renewal.
		if !strings.Contains(holder.stderr.String(), "force-released by ") {
			t.Errorf("old holder's stderr should say it was force-released: %q", holder.stderr)
		}
	})
}

// TestForceReleaseNow: with --now the permits are free at once: a waiter
// gets in although the old holder (its supervisor frozen, as a hung
// process would be) has neither learned nor released.
func TestForceReleaseNow(t *testing.T) {
	t.Parallel()
	be, dir := fileBackend(t), t.TempDir()
	ready := filepath.Join(dir, "ready")
	holder := startSema(t, be, "run", "--ttl", "30s", "stuck", "--", "sh", "-c", "echo $PPID > "+ready+"; exec sleep 100")
	sup := pids(t, waitFile(t, ready, holder))[0] // the job's parent holds the lease
	if err := syscall.Kill(sup, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(sup, syscall.SIGCONT)
	if _, stderr, code := runSema(t, be, "run", "--wait", "1s", "stuck", "--", "true"); code != ExitNotAcquired {
		t.Fatalf("while held: exit %d, want %d; stderr %q", code, ExitNotAcquired, stderr)
	}
	stdout, stderr, code := runSema(t, be, "release", "--force", "--now", "stuck")
	if code != 0 || !strings.Contains(stdout, "its permits are free now") {
		t.Fatalf("release --force --now: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, stderr, code := runSema(t, be, "run", "--wait", "5s", "stuck", "--", "true"); code != 0 {
		t.Fatalf("after --now: exit %d; stderr %q", code, stderr)
	}
	if err := syscall.Kill(sup, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := holder.wait(t, 60*time.Second); code != ExitLeaseLost {
		t.Fatalf("old holder: exit %d, want %d; stderr: %s", code, ExitLeaseLost, holder.stderr)
	}
}

// TestForceReleaseToldAtOnce: the old holder learns of a force-release at
// once, not at its next renewal (TTL/3 = 20s here): on file:// once it has
// held the lease a second; through sema serve by a notice on its sema-mux
// connection. Its sema run terminates the job, exits 76 and says who
// force-released it (through sema serve, with the caller as the server
// knows it).
func TestForceReleaseToldAtOnce(t *testing.T) {
	onFileAndServe(t, func(t *testing.T, be, dir string) {
		ready := filepath.Join(dir, "ready")
		holder := startSema(t, be, "run", "--ttl", "60s", "long", "--", "sh", "-c", "echo $$ > "+ready+"; exec sleep 100")
		waitFile(t, ready, holder)
		time.Sleep(2 * time.Second) // a file:// holder's doorbell is ready within a second
		if stdout, stderr, code := runSema(t, be, "release", "--force", "long"); code != 0 {
			t.Fatalf("release --force: exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		if code := holder.wait(t, 10*time.Second); code != ExitLeaseLost {
			t.Fatalf("old holder: exit %d, want %d; stderr: %s", code, ExitLeaseLost, holder.stderr)
		}
		host, _ := os.Hostname()
		stderr := holder.stderr.String()
		if want := "force-released by " + loginName(os.Getenv) + "@" + host; !strings.Contains(stderr, want) || !strings.Contains(stderr, "terminating the job") {
			t.Errorf("old holder's stderr should say %q and that the job was terminated: %q", want, stderr)
		}
	})
}
