//go:build linux

package cli

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sema-dev/sema/internal/testenv"
)

func TestRunExitStatusPassesThrough(t *testing.T) {
	t.Parallel()
	be := fileBackend(t)
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 3", 3},
		{"exit 75", 75}, // the child's own 75 is indistinguishable, as with flock -E
		{"kill -TERM $$", 128 + 15},
		{"kill -KILL $$", 128 + 9},
	} {
		_, stderr, code := runSema(t, be, "run", "job", "--", "sh", "-c", tc.script)
		if code != tc.want {
			t.Errorf("%q: exit %d, want %d; stderr: %s", tc.script, code, tc.want, stderr)
		}
	}
	if _, stderr, code := runSema(t, be, "run", "job", "--", "/nonexistent/cmd"); code != 127 {
		t.Errorf("missing command: exit %d, want 127; stderr: %s", code, stderr)
	}
}

func TestRunUsageErrors(t *testing.T) {
	t.Parallel()
	be := fileBackend(t)
	for _, args := range [][]string{
		{},
		{"name", "--"},
		{"--limit", "0", "name", "--", "true"},
		{"--limit", "-1", "name", "--", "true"},
		{"--limit", "2", "--weight", "3", "name", "--", "true"},
		{"--weight", "0", "name", "--", "true"},
		{"--ttl", "1ns", "name", "--", "true"},
		{"--ttl", "forever", "name", "--", "true"},
		{"--wait", "-1s", "name", "--", "true"},
		{"--wait", "1s", "--nonblock", "name", "--", "true"},
		{"-n", "3", "name", "--", "true"},
		{"-s", "name", "--", "true"},
		{"-E", "300", "name", "--", "true"},
		{"name", "-c"},
		{"--max-hold", "0s", "name", "--", "true"},
		{"--grace", "10s", "name", "--", "true"}, // > ttl/10
		{"--owner", "a\nb", "name", "--", "true"},
		{"--bogus", "name", "--", "true"},
		{"name", "--limit", "2", "--", "true"}, // flags after NAME
		{"", "--", "true"},
		{"bad\x01name", "--", "true"},
	} {
		_, stderr, code := runSema(t, be, append([]string{"run"}, args...)...)
		if code != ExitUsage {
			t.Errorf("run %q: exit %d, want %d", args, code, ExitUsage)
		}
		if !strings.HasPrefix(stderr, "sema run: ") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("run %q: want one line of explanation, got %q", args, stderr)
		}
	}
	for _, h := range []string{"-h", "--help"} {
		if stdout, _, code := runSema(t, be, "run", h); code != ExitOK || !strings.Contains(stdout, "usage: sema run") {
			t.Errorf("run %s: exit %d, want 0 and the help on stdout; got %q", h, code, stdout)
		}
	}
}

func TestRunEnvironment(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := runSema(t, fileBackend(t), "run", "--limit", "3", "--weight", "2", "--owner", "me", "envjob", "--",
		"sh", "-c", `echo "$SEMA_NAME|$SEMA_TOKEN|$SEMA_LEASE_ID|$SEMA_LIMIT|$SEMA_WEIGHT"`)
	if code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, stderr)
	}
	f := strings.Split(strings.TrimSpace(stdout), "|")
	if len(f) != 5 || f[0] != "envjob" || f[3] != "3" || f[4] != "2" || f[2] == "" {
		t.Fatalf("child saw %q", stdout)
	}
	if tok, err := strconv.ParseUint(f[1], 10, 64); err != nil || tok == 0 {
		t.Fatalf("SEMA_TOKEN %q", f[1])
	}
}

func TestRunForwardsSignals(t *testing.T) {
	t.Parallel()
	if signal.Ignored(syscall.SIGHUP) {
		// Started under nohup: the jobs would inherit SIGHUP ignored, and a
		// shell cannot trap a signal ignored on entry. Handled here, it is
		// at its default in the processes this test starts.
		signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
	}
	be := fileBackend(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		dir := t.TempDir()
		ready, got := filepath.Join(dir, "ready"), filepath.Join(dir, "got")
		script := `trap 'echo "$1" > ` + got + `; exit 7' ` + strings.TrimPrefix(sigName(sig), "SIG") +
			`; echo $$ > ` + ready + `; while :; do sleep 0.05; done`
		s := startSema(t, be, "run", "sig", "--", "sh", "-c", script, "sh", sigName(sig))
		waitFile(t, ready, s)
		sendSignal(t, s, sig)
		if code := s.wait(t, 30*time.Second); code != 7 {
			t.Fatalf("%v: exit %d, want the child's 7; stderr: %s", sig, code, s.stderr)
		}
		if b, _ := os.ReadFile(got); strings.TrimSpace(string(b)) != sigName(sig) {
			t.Fatalf("%v: child's trap wrote %q", sig, b)
		}
	}
}

func sigName(s syscall.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return s.String()
}

// TestRunLeftoversDie: processes left in the job's group when the command
// exits are terminated before sema run returns (they would otherwise run
// without the lease).
func TestRunLeftoversDie(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "bg")
	_, stderr, code := runSema(t, fileBackend(t), "run", "left", "--", "sh", "-c", "sleep 100 & echo $! > "+pidFile+"; exit 4")
	if code != 4 {
		t.Fatalf("exit %d; stderr: %s", code, stderr)
	}
	for _, p := range pids(t, waitFile(t, pidFile, nil)) {
		if processRunning(p) {
			t.Errorf("background process %d still running after sema run returned", p)
		}
	}
}

// TestRunKeepsIgnoredSignals: signals ignored when sema run starts (nohup,
// "cmd &" in a script) stay ignored in the job, as they would without
// sema run.
func TestRunKeepsIgnoredSignals(t *testing.T) {
	t.Parallel()
	be := fileBackend(t)
	stdout, stderr, code := runSema(t, be, "run", "--owner", "x", "ign", "--", "true") // warm-up: binary works
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	c := semaCmd(t, be)
	c.Path, c.Args = "/bin/sh", []string{"sh", "-c", `trap '' INT HUP; exec "$0" run ign -- sh -c 'kill -INT $$; kill -HUP $$; echo survived'`, c.Args[0]}
	out, err := c.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "survived" {
		t.Fatalf("job with SIGINT and SIGHUP ignored at start: %v, output %q", err, out)
	}
}

// TestRunSupervisorKilled: if the supervisor (the process holding the lease)
// is killed, sema run kills the whole job itself and exits 76.
func TestRunSupervisorKilled(t *testing.T) {
	t.Parallel()
	s := supervisorKilled(t, "sup", nil)
	if !strings.Contains(s.stderr.String(), "supervisor died") {
		t.Errorf("stderr: %q", s.stderr)
	}
}

// TestRunSupervisorKilledBeforeReport: the supervisor dies before sema run
// learned the job's process group; sema run (a child subreaper) still finds
// and kills the whole job.
func TestRunSupervisorKilledBeforeReport(t *testing.T) {
	t.Parallel()
	supervisorKilled(t, "sup2", []string{"SEMA_TEST_PGID_DELAY=1h"})
}

// supervisorKilled runs a job that ignores SIGTERM and has a background
// child, SIGKILLs the supervisor, and checks that sema run exits 76 with no
// job process left.
func supervisorKilled(t *testing.T, name string, env []string) *started {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "pids")
	s := startSemaEnv(t, env, fileBackend(t), "run", name, "--", "sh", "-c",
		"trap '' TERM; sleep 100 & echo $PPID $$ $! > "+pidFile+"; sleep 100; wait")
	ps := pids(t, waitFile(t, pidFile, s))
	if err := syscall.Kill(ps[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := s.wait(t, 30*time.Second); code != ExitLeaseLost {
		t.Fatalf("exit %d, want %d; stderr: %s", code, ExitLeaseLost, s.stderr)
	}
	for _, p := range ps[1:] {
		if processRunning(p) {
			t.Errorf("job process %d still running", p)
		}
	}
	return s
}

// TestRunGivesJobTheTerminal: run from a terminal, the job's process group
// gets the terminal (as a shell gives it to a foreground job), so a job that
// reads the terminal is not stopped by SIGTTIN — whether sema run leads its
// process group (bash execs a lone command) or shares its parent's (dash's
// "sh -c" forks, without job control). Without a pty tool the test is
// skipped.
func TestRunGivesJobTheTerminal(t *testing.T) {
	t.Parallel()
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("no script(1) to make a pty")
	}
	be := fileBackend(t)
	for _, sh := range []string{"/bin/sh", "/bin/bash", "/bin/dash"} {
		t.Run(sh, func(t *testing.T) {
			if _, err := os.Stat(sh); err != nil {
				t.Skipf("no %s", sh)
			}
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c := exec.CommandContext(ctx, script, "-qec", testenv.SemaBinary(t)+` run --backend `+be+` tty -- sh -c 'read l; echo "got:$l"; exit 3'`, "/dev/null")
			c.Env = append(os.Environ(), "SHELL="+sh) // script(1) runs the command with $SHELL -c
			c.Stdin = strings.NewReader("hello\n")
			out, err := c.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("the job reading the terminal hung (stopped by SIGTTIN?); output %q", out)
			}
			if c.ProcessState.ExitCode() != 3 || !strings.Contains(string(out), "got:hello") {
				t.Fatalf("exit %v, output %q", err, out)
			}
		})
	}
}
