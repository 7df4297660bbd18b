package lockbench

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/mem"
)

func openMem(context.Context) (sema.Backend, error) { return mem.New(), nil }

// TestPivotDetectsLostUpdates: without a lock the read-modify-write of the
// global file loses updates, and runPivot reports it: the check can fail.
func TestPivotDetectsLostUpdates(t *testing.T) {
	t.Parallel()
	o := PivotOptions{Workers: 8, Interval: 0, Duration: 300 * time.Millisecond, Payload: 64, Dir: t.TempDir()}
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
	o := PivotOptions{Workers: 4, Interval: time.Millisecond, Duration: 200 * time.Millisecond, Rounds: 4,
		Payload: 64, Dir: t.TempDir(), Backend: "mem://", Open: openMem, Locks: []string{"sema", "flock"}}
	rs, err := runPivotRounds(context.Background(), o, 3, "sharded")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].n == 0 || rs[1].n == 0 {
		t.Fatalf("results %+v", rs)
	}
}
