//go:build linux

package cli

import (
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests run several sema processes against one file:// directory.

func TestRunNoWaitOnHeldLock(t *testing.T) {
	t.Parallel()
	be, dir := fileBackend(t), t.TempDir()
	ready := filepath.Join(dir, "ready")
	holder := startSema(t, be, "run", "--owner", "the-holder", "held", "--", "sh", "-c", "echo $$ > "+ready+"; exec sleep 100")
	waitFile(t, ready, holder)

	start := time.Now()
	_, stderr, code := runSema(t, be, "run", "--nonblock", "held", "--", "true")
	if code != ExitNotAcquired {
		t.Fatalf("--nonblock on a held lock: exit %d, want %d; stderr: %s", code, ExitNotAcquired, stderr)
	}
	if !strings.Contains(stderr, "the-holder") {
		t.Errorf("the message should name the holder: %q", stderr)
	}
	t.Logf("--nonblock answered in %v: %s", time.Since(start), strings.TrimSpace(stderr))

	_, stderr, code = runSema(t, be, "run", "--wait", "200ms", "held", "--", "true")
	if code != ExitNotAcquired || !strings.Contains(stderr, "within 200ms") {
		t.Fatalf("--wait 200ms on a held lock: exit %d, stderr %q", code, stderr)
	}
	sendSignal(t, holder, syscall.SIGTERM)
	if code := holder.wait(t, 30*time.Second); code != 128+15 {
		t.Fatalf("holder: exit %d, want 143", code)
	}
	if _, stderr, code := runSema(t, be, "run", "--nonblock", "held", "--", "true"); code != 0 {
		t.Fatalf("after the holder ended: exit %d; stderr: %s", code, stderr)
	}
}

// TestRunKill9 is the consul-lock grandchild bug: kill -9 of the holding
// sema run must kill its whole job (a grandchild included), and a waiting
// sema run must get in only once the job is dead.
func TestRunKill9(t *testing.T) {
	t.Parallel()
	be, dir := fileBackend(t), t.TempDir()
	pidFile, check := filepath.Join(dir, "pids"), filepath.Join(dir, "check")
	// The job ignores SIGTERM: it dies only at the SIGKILL after the grace
	// (ttl/10), and the waiter must not get in before.
	holder := startSema(t, be, "run", "--ttl", "3s", "k9", "--", "sh", "-c",
		"trap '' TERM; sleep 100 & echo $$ $! >> "+pidFile+"; sleep 100; wait")
	jobPids := pids(t, waitFile(t, pidFile, holder))
	if len(jobPids) != 2 {
		t.Fatalf("pids %v", jobPids)
	}
	// The waiter's job records, the moment it gets in, which of the first
	// job's processes still run.
	script := `for p in ` + strings.TrimSpace(strconvInts(jobPids)) + `; do
		if [ -r /proc/$p/stat ] && ! grep -q ') [ZX] ' /proc/$p/stat; then echo "alive $p"; fi
	done > ` + check + `.tmp; echo done >> ` + check + `.tmp; mv ` + check + `.tmp ` + check
	waiter := startSema(t, be, "run", "k9", "--", "sh", "-c", script)
	waitQueued(t, be, "k9", 1)

	if err := holder.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	if code := waiter.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("waiter: exit %d; stderr: %s", code, waiter.stderr)
	}
	t.Logf("waiter done %v after kill -9 of the holder", time.Since(killedAt))
	got := waitFile(t, check, nil)
	if strings.Contains(got, "alive") {
		t.Fatalf("the waiter got the lock while the killed holder's job still ran: %q", got)
	}
	for _, p := range jobPids {
		if processRunning(p) {
			t.Errorf("job process %d still running", p)
		}
	}
}

func strconvInts(ps []int) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(strconv.Itoa(p) + " ")
	}
	return b.String()
}

// waitQueued waits until name has n waiters.
func waitQueued(t *testing.T, be, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		out, _, code := runSema(t, be, "status", "--json", name)
		if code == 0 && strings.Count(out, `"since"`) >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%d waiter(s) on %q never showed", n, name)
}

// TestRunLeaseLostForceRelease: an admin force-release ends the lease; the
// job gets SIGTERM and sema run exits 76. The job dies of SIGTERM as it is
// delivered (a process that does not handle it), so the test does not
// depend on the job being scheduled within the grace before SIGKILL.
func TestRunLeaseLostForceRelease(t *testing.T) {
	t.Parallel()
	be, dir := fileBackend(t), t.TempDir()
	ready := filepath.Join(dir, "ready")
	holder := startSema(t, be, "run", "--ttl", "1s", "lost", "--", "sh", "-c", "echo $$ > "+ready+"; exec sleep 1000")
	waitFile(t, ready, holder)
	stdout, stderr, code := runSema(t, be, "release", "--force", "lost")
	if code != 0 || !strings.Contains(stdout, "released") {
		t.Fatalf("release: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code := holder.wait(t, 30*time.Second); code != ExitLeaseLost {
		t.Fatalf("holder: exit %d, want %d; stderr: %s", code, ExitLeaseLost, holder.stderr)
	}
	wantTerminated(t, holder)
}

// wantTerminated checks that sema run said its lease was lost and that its
// job ended by the SIGTERM it sent.
func wantTerminated(t *testing.T, s *started) {
	t.Helper()
	msg := s.stderr.String()
	if !strings.Contains(msg, "lost") || !strings.Contains(msg, "terminating the job") {
		t.Errorf("stderr should say the lease was lost and the job terminated: %q", msg)
	}
	if !strings.Contains(msg, "job ended: terminated by SIGTERM") {
		t.Errorf("the job did not die of SIGTERM: %q", msg)
	}
}

// TestRunLeaseLostFrozenSupervisor: the process holding the lease is frozen
// (SIGSTOP) past its TTL; the backend expires the lease and lets another
// holder in; when the supervisor wakes it terminates its job at once and
// sema run exits 76. Each step waits for the one before: the second
// holder's grant, then the first holder's exit.
func TestRunLeaseLostFrozenSupervisor(t *testing.T) {
	t.Parallel()
	be, dir := fileBackend(t), t.TempDir()
	ready := filepath.Join(dir, "ready")
	holder := startSema(t, be, "run", "--ttl", "500ms", "frozen", "--", "sh", "-c", "echo $PPID > "+ready+"; exec sleep 1000")
	sup := pids(t, waitFile(t, ready, holder))[0] // the job's parent holds the lease
	if err := syscall.Kill(sup, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Another holder gets in once the TTL has run out.
	_, stderr, code := runSema(t, be, "run", "--wait", "30s", "frozen", "--", "true")
	if err := syscall.Kill(sup, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("second holder: exit %d; stderr %s", code, stderr)
	}
	if code := holder.wait(t, 30*time.Second); code != ExitLeaseLost {
		t.Fatalf("frozen holder: exit %d, want %d; stderr: %s", code, ExitLeaseLost, holder.stderr)
	}
	wantTerminated(t, holder)
}

// TestRunSemaphoreLimit: with --limit 2, two jobs hold at once and a third
// is refused.
func TestRunSemaphoreLimit(t *testing.T) {
	t.Parallel()
	be, dir := fileBackend(t), t.TempDir()
	var holders []*started
	for i := range 2 {
		ready := filepath.Join(dir, "ready"+strconv.Itoa(i))
		h := startSema(t, be, "run", "--limit", "2", "pool", "--", "sh", "-c", "echo $SEMA_TOKEN > "+ready+"; exec sleep 100")
		waitFile(t, ready, h)
		holders = append(holders, h)
	}
	if _, stderr, code := runSema(t, be, "run", "--limit", "2", "--nonblock", "pool", "--", "true"); code != ExitNotAcquired {
		t.Fatalf("third: exit %d; stderr %s", code, stderr)
	}
	if _, stderr, code := runSema(t, be, "run", "--limit", "3", "--nonblock", "pool", "--", "true"); code != ExitUsage {
		t.Fatalf("mismatched limit: exit %d, want %d; stderr %s", code, ExitUsage, stderr)
	}
	for _, h := range holders {
		sendSignal(t, h, syscall.SIGTERM)
		h.wait(t, 30*time.Second)
	}
}
