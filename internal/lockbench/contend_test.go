package lockbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// The tests start this test binary again as the worker processes.
const envWorker = "LOCKBENCH_WORKER" // "ID COUNTER"

func TestMain(m *testing.M) {
	if w := os.Getenv(envWorker); w != "" {
		var a WorkerArgs
		fmt.Sscan(w, &a.ID, &a.Counter)
		a.Name = "test"
		if err := Worker(context.Background(), a, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func testOptions(t *testing.T, procs int, locks ...string) ContendOptions {
	return ContendOptions{
		Procs: []int{procs}, Increments: 600, Rounds: 2, Locks: locks, Backend: "none", Dir: t.TempDir(),
		Spawn: func(id int, counter, _ string) *exec.Cmd {
			c := exec.Command(os.Args[0], "-test.run=^$")
			c.Env = append(os.Environ(), envWorker+"="+strconv.Itoa(id)+" "+counter)
			c.Stderr = os.Stderr
			return c
		},
	}
}

// Separate processes incrementing without a lock lose updates, and the
// count check after the round says so: the check can fail.
func TestContendDetectsLostUpdates(t *testing.T) {
	err := Contend(context.Background(), testOptions(t, 6, "none"), &bytes.Buffer{}, &bytes.Buffer{})
	if !errors.Is(err, ErrLostUpdates) {
		t.Fatalf("Contend with no lock: %v, want lost updates", err)
	}
}

// Under flock(2) the count is exact in every round, with the paced
// hand-off measure too, and the table reports every lock.
func TestContendFlock(t *testing.T) {
	opts := testOptions(t, 3, "flock")
	opts.Relay = 20
	var out, progress bytes.Buffer
	if err := Contend(context.Background(), opts, &out, &progress); err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	for _, want := range []string{"incr/s", "hand-off with one waiter", "flock", "load average"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if n := strings.Count(progress.String(), "counter exact"); n != 4 {
		t.Errorf("%d rounds checked, want 4:\n%s", n, progress.String())
	}
}

// The reference FIFO lock excludes as flock(2) does: the count is exact
// in every round, beside flock in alternating order.
func TestContendTicketLock(t *testing.T) {
	opts := testOptions(t, 4, "flock", "fifo")
	opts.Relay = 20
	var out, progress bytes.Buffer
	if err := Contend(context.Background(), opts, &out, &progress); err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if n := strings.Count(progress.String(), "fifo  round"); n != 4 {
		t.Errorf("%d fifo rounds, want 4:\n%s", n, progress.String())
	}
	if n := strings.Count(progress.String(), "counter exact"); n != 8 {
		t.Errorf("%d rounds checked, want 8:\n%s", n, progress.String())
	}
}
