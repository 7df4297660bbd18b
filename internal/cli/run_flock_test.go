package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitOutput waits until s's standard error (or output, with stdout) holds
// want, and fails the test if s exits first or after a generous deadline.
func waitOutput(t *testing.T, s *started, stdout bool, want string) string {
	t.Helper()
	buf := s.stderr
	if stdout {
		buf = s.stdout
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if out := buf.String(); strings.Contains(out, want) {
			return out
		}
		select {
		case <-s.done:
			if out := buf.String(); strings.Contains(out, want) {
				return out
			}
			t.Fatalf("sema %q exited (%d) without saying %q; stdout %q, stderr %q", s.cmd.Args[1:], s.cmd.ProcessState.ExitCode(), want, s.stdout, s.stderr)
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatalf("sema %q did not say %q; stdout %q, stderr %q", s.cmd.Args[1:], want, s.stdout, s.stderr)
	return ""
}

// TestRunHoldsWithoutCommand: "sema run NAME" holds the lock until
// interrupted, printing the lease as shell variables, as etcdctl lock does.
func TestRunHoldsWithoutCommand(t *testing.T) {
	t.Parallel()
	be := fileBackend(t)
	h := startSema(t, be, "run", "--owner", "console", "held")
	out := waitOutput(t, h, true, "SEMA_WEIGHT=")
	for _, v := range []string{"SEMA_NAME=held\n", "SEMA_TOKEN=", "SEMA_LEASE_ID=", "SEMA_LIMIT=1\n"} {
		if !strings.Contains(out, v) {
			t.Errorf("the lease printed lacks %q: %q", v, out)
		}
	}
	waitOutput(t, h, false, `holding "held"`)
	if _, stderr, code := runSema(t, be, "run", "-n", "held", "--", "true"); code != ExitNotAcquired || !strings.Contains(stderr, "console") {
		t.Fatalf("run -n while held: exit %d, stderr %q", code, stderr)
	}
	sendSignal(t, h, syscall.SIGINT)
	if code := h.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("interrupted holder: exit %d, want 0; stderr %q", code, h.stderr)
	}
	if _, stderr, code := runSema(t, be, "run", "-n", "held", "--", "true"); code != 0 {
		t.Fatalf("after the holder was interrupted: exit %d, stderr %q", code, stderr)
	}
	// -q: the lease on standard output, nothing on standard error.
	q := startSema(t, be, "run", "-q", "held")
	waitOutput(t, q, true, "SEMA_WEIGHT=")
	sendSignal(t, q, syscall.SIGTERM)
	if code := q.wait(t, 30*time.Second); code != 0 || q.stderr.String() != "" {
		t.Fatalf("quiet holder: exit %d, stderr %q", code, q.stderr)
	}
}

// TestRunSaysWhomItWaitsFor: a sema run that waits over a second says on
// standard error whom it waits for, and when it got the lock; with -q it
// says nothing.
func TestRunSaysWhomItWaitsFor(t *testing.T) {
	t.Parallel()
	be := fileBackend(t)
	h := startSema(t, be, "run", "--owner", "the-holder", "busy")
	waitOutput(t, h, true, "SEMA_WEIGHT=")
	quiet := startSema(t, be, "run", "-q", "-w", "60", "busy", "--", "true")
	loud := startSema(t, be, "run", "--timeout", "60", "busy", "--", "true")
	// The quiet waiter started first: once the loud one has spoken, the
	// quiet one has waited over a second too.
	msg := waitOutput(t, loud, false, `waiting for "busy"`)
	if !strings.Contains(msg, "the-holder") || strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "sema run: ") {
		t.Errorf("the waiting line: %q, want one line naming the holder", msg)
	}
	sendSignal(t, h, syscall.SIGTERM)
	for _, s := range []*started{h, quiet, loud} {
		if code := s.wait(t, 30*time.Second); code != 0 {
			t.Fatalf("sema %q: exit %d; stderr %q", s.cmd.Args[1:], code, s.stderr)
		}
	}
	if !strings.Contains(loud.stderr.String(), `acquired "busy" after`) {
		t.Errorf("the loud waiter did not say it acquired: %q", loud.stderr)
	}
	if quiet.stderr.String() != "" {
		t.Errorf("sema run -q said %q", quiet.stderr)
	}
}

// TestRunFlockHabits: -c, -E, -w with plain seconds, -n, as flock(1) takes
// them.
func TestRunFlockHabits(t *testing.T) {
	t.Parallel()
	be, dir := fileBackend(t), t.TempDir()
	out := filepath.Join(dir, "out")
	if _, stderr, code := runSema(t, be, "run", "-n", "job", "-c", `echo "$SEMA_NAME ran" > `+out+`; exit 3`); code != 3 {
		t.Fatalf("run -c: exit %d, stderr %q", code, stderr)
	}
	if b, _ := os.ReadFile(out); string(b) != "job ran\n" {
		t.Fatalf("run -c wrote %q", b)
	}
	h := startSema(t, be, "run", "job")
	waitOutput(t, h, true, "SEMA_WEIGHT=")
	if _, stderr, code := runSema(t, be, "run", "-nE", "0", "job", "--", "false"); code != 0 || !strings.Contains(stderr, "held by") {
		t.Errorf("run -nE 0 on a held lock: exit %d, want 0; stderr %q", code, stderr)
	}
	if _, stderr, code := runSema(t, be, "run", "-E", "9", "-w", "0.2", "job", "--", "true"); code != 9 || !strings.Contains(stderr, "within 200ms") {
		t.Errorf("run -E 9 -w 0.2 on a held lock: exit %d, want 9; stderr %q", code, stderr)
	}
	sendSignal(t, h, syscall.SIGTERM)
	h.wait(t, 30*time.Second)
	if _, stderr, code := runSema(t, be, "run", "--ttl", "10", "--max-hold", "60", "-w", "5", "job", "--", "true"); code != 0 {
		t.Errorf("durations in plain seconds: exit %d; stderr %q", code, stderr)
	}
}

// TestBackendURLsExplainThemselves: a URL without a scheme is refused with
// the URL that was meant, said once; mem:// is refused where it cannot
// exclude anything.
func TestBackendURLsExplainThemselves(t *testing.T) {
	t.Parallel()
	abs, err := filepath.Abs("some/dir")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url, says string
	}{
		{"127.0.0.1:7543", "write http://127.0.0.1:7543"},
		{"localhost:7543", "write http://localhost:7543"},
		{"/var/lib/sema", "write file:///var/lib/sema"},
		{"some/dir", "write file://" + abs},
		{"gopher://x", `unknown scheme "gopher"`},
		{"mem://", "use file:///dir"},
	} {
		for _, args := range [][]string{{"run", "--backend", tc.url, "x", "--", "true"}, {"ls", "--backend", tc.url}, {"status", "x"}} {
			_, stderr, code := runSema(t, tc.url, args...)
			if code != ExitUsage || !strings.Contains(stderr, tc.says) {
				t.Errorf("sema %q with %s: exit %d, stderr %q; want %d saying %q", args, tc.url, code, stderr, ExitUsage, tc.says)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "sema "+args[0]+": ") || strings.Contains(stderr, "sema: ") {
				t.Errorf("sema %q with %s: %q is not one line, prefixed once", args, tc.url, stderr)
			}
		}
	}
}
