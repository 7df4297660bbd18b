package cli

import (
	"bytes"
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/sema-dev/sema"
)

// TestBenchPivotSmoke runs a tiny pivot benchmark on every lock and layout;
// each run checks that no update was lost (a lost update breaks exclusion).
func TestBenchPivotSmoke(t *testing.T) {
	t.Parallel()
	backends := []string{"mem://"}
	if u := (&url.URL{Scheme: "file", Path: t.TempDir()}).String(); fileBackendOK(u) {
		backends = append(backends, u)
	}
	for _, be := range backends {
		var out, errb bytes.Buffer
		env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
		code := Run(context.Background(), env, []string{"bench", "pivot", "--servers", "2,5", "--workers", "6",
			"--interval", "0s", "--duration", "150ms", "--payload", "100", "--backend", be, "--dir", t.TempDir()})
		if code != 0 {
			t.Fatalf("%s: exit %d; stderr: %s", be, code, errb.String())
		}
		table := out.String()
		for _, want := range []string{"servers", "global p99", "sharded p99", "sema", "flock"} {
			if !strings.Contains(table, want) {
				t.Errorf("%s: output lacks %q:\n%s", be, want, table)
			}
		}
		t.Logf("%s:\n%s", be, table)
	}
}

func fileBackendOK(u string) bool {
	b, err := sema.Open(context.Background(), u)
	if err != nil {
		return false
	}
	b.Close()
	return true
}

func TestBenchPivotUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"bench"},
		{"bench", "nope"},
		{"bench", "pivot", "--servers", "0"},
		{"bench", "pivot", "--servers", "10,x"},
		{"bench", "pivot", "--workers", "0"},
		{"bench", "pivot", "--duration", "0s"},
		{"bench", "pivot", "--rounds", "0"},
		{"bench", "pivot", "--locks", "redis"},
		{"bench", "pivot", "extra"},
		{"bench", "contend", "--procs", "0"},
		{"bench", "contend", "--procs", "2,x"},
		{"bench", "contend", "--rounds", "0"},
		{"bench", "contend", "--backend", "mem://"},
		{"bench", "contend", "--locks", "none"},
		{"bench", "contend", "--locks", "sema,futex"},
		{"bench", "contend", "extra"},
	} {
		var errb bytes.Buffer
		env := &Env{Stdout: &bytes.Buffer{}, Stderr: &errb, Getenv: func(string) string { return "" }}
		if code := Run(context.Background(), env, args); code != ExitUsage || errb.Len() == 0 {
			t.Errorf("%q: exit %d, stderr %q", args, code, errb.String())
		}
	}
}

// TestBenchContendSmoke runs a tiny contend benchmark through the sema
// binary: its worker processes are that binary again, and so are the
// sema run loops; every round's count is checked.
func TestBenchContendSmoke(t *testing.T) {
	t.Parallel()
	fileBackend(t) // skips the test without one
	out, stderr, code := runSema(t, "", "bench", "contend", "--procs", "2,3", "--increments", "60", "--rounds", "2",
		"--handoffs", "10", "--cli-loops", "3", "--cli-runs", "2", "--locks", "sema,flock,fifo", "--dir", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, stderr)
	}
	for _, want := range []string{"incr/s", "hand-off with one waiter", "fifo", "shell loops", "sema run", "load average after"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// 2 P × 2 rounds × 3 locks, 2 hand-off rounds × 3 locks, 2 shell rounds
	// × 2 commands (1 without flock(1) on the host)
	if n := strings.Count(stderr, "counter exact"); n != 22 && n != 20 {
		t.Errorf("%d rounds checked:\n%s", n, stderr)
	}
	t.Logf("%s", out)
}
