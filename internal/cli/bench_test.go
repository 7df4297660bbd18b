package cli

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema/internal/dsn"
)

// TestBenchPivotSmoke runs a tiny pivot benchmark on every lock and layout;
// each run checks that no update was lost (the seed's exclusion test).
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
	b, err := dsn.Open(context.Background(), u)
	if err != nil {
		return false
	}
	b.Close()
	return true
}

// TestPivotDetectsLostUpdates: without a lock the read-modify-write of the
// global file loses updates, and runPivot reports it: the check can fail.
func TestPivotDetectsLostUpdates(t *testing.T) {
	t.Parallel()
	o := pivotOptions{workers: 8, interval: 0, duration: 300 * time.Millisecond, payload: 64, dir: t.TempDir(), getenv: os.Getenv}
	_, err := runPivot(context.Background(), o, 1, "none", "global")
	if !errors.Is(err, errLostUpdates) {
		t.Fatalf("runPivot with no lock: err %v, want lost updates", err)
	}
}

func TestSummarize(t *testing.T) {
	var ws []time.Duration
	for i := 1; i <= 200; i++ {
		ws = append(ws, time.Duration(i)*time.Millisecond)
	}
	r := summarize(ws)
	if r.n != 200 || r.p99 != 198*time.Millisecond || r.max != 200*time.Millisecond || r.avg != 100500*time.Microsecond {
		t.Fatalf("%+v", r)
	}
	if r := summarize([]time.Duration{5}); r.p99 != 5 || r.avg != 5 || r.p99lo != 5 || r.p99hi != 5 {
		t.Fatalf("%+v", r)
	}
}

// The p99's confidence interval: the order statistics around rank 0.99n,
// about ±1.96·sqrt(n·0.99·0.01) ranks away, within the samples.
func TestQuantileCI(t *testing.T) {
	for _, c := range []struct{ n, lo, hi int }{
		{1, 0, 0},
		{100, 96, 99},      // ±1.95 ranks around 99
		{1600, 1575, 1591}, // ±7.8 ranks around 1584
		{10000, 9879, 9919},
	} {
		lo, hi := quantileCI(c.n, 0.99)
		if lo != c.lo || hi != c.hi {
			t.Errorf("quantileCI(%d, 0.99) = %d, %d; want %d, %d", c.n, lo, hi, c.lo, c.hi)
		}
		if i := (c.n*99+99)/100 - 1; i < lo || i > hi {
			t.Errorf("n=%d: the p99's rank %d is outside [%d, %d]", c.n, i, lo, hi)
		}
	}
	ws := make([]time.Duration, 1000)
	for i := range ws {
		ws[i] = time.Duration(i+1) * time.Microsecond
	}
	r := summarize(ws)
	if r.p99lo > r.p99 || r.p99 > r.p99hi || r.p99hi > r.max {
		t.Fatalf("%+v", r)
	}
}

// Rounds interleave the locks: each configuration's waits come from every
// round, and every round checks the files for lost updates.
func TestPivotRounds(t *testing.T) {
	t.Parallel()
	o := pivotOptions{workers: 4, interval: time.Millisecond, duration: 200 * time.Millisecond, rounds: 4,
		payload: 64, dir: t.TempDir(), backend: "mem://", locks: []string{"sema", "flock"}, getenv: os.Getenv}
	rs, err := runPivotRounds(context.Background(), o, 3, "sharded")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].n == 0 || rs[1].n == 0 {
		t.Fatalf("results %+v", rs)
	}
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
	} {
		var errb bytes.Buffer
		env := &Env{Stdout: &bytes.Buffer{}, Stderr: &errb, Getenv: func(string) string { return "" }}
		if code := Run(context.Background(), env, args); code != ExitUsage || errb.Len() == 0 {
			t.Errorf("%q: exit %d, stderr %q", args, code, errb.String())
		}
	}
}
