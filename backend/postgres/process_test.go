package postgres_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sema-dev/sema/backend/postgres"
	"github.com/sema-dev/sema/internal/testenv"
)

// uniqueName is a name no other test or earlier run uses.
func uniqueName(s string) string { return s + "/" + strings.ToLower(rand.Text()[:8]) }

// The exclusion test across processes: workers × rounds `sema run`
// processes, each reading a counter file, and writing it back plus one,
// under the lock. A lost update shows as a total below workers × rounds;
// each job also logs the value it read and its fencing token, which must
// rise with the value.
func TestProcessCounter(t *testing.T) {
	const workers, rounds = 6, 10
	url := testenv.SharedPostgres(t).URL()
	dir := t.TempDir()
	counter, log := filepath.Join(dir, "counter"), filepath.Join(dir, "log")
	if err := os.WriteFile(counter, []byte("0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	name := uniqueName("proc/counter")
	job := `n=$(cat "$1"); echo "$n $SEMA_TOKEN" >> "$2"; echo $((n+1)) > "$1"`
	loop := fmt.Sprintf(`for i in $(seq %d); do "$0" run --backend "$1" --wait 2m %q -- sh -c '%s' job "$2" "$3" || exit 1; done`,
		rounds, name, job)
	start := time.Now()
	type worker struct {
		cmd    *exec.Cmd
		stderr lockedBuffer
	}
	var ws []*worker
	for range workers {
		w := &worker{cmd: exec.Command("sh", "-c", loop, testenv.SemaBinary(t), url, counter, log)}
		w.cmd.Stderr = &w.stderr
		if err := w.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	for _, w := range ws {
		if err := w.cmd.Wait(); err != nil {
			t.Errorf("worker: %v; stderr: %s", err, w.stderr.String())
		}
	}
	data, _ := os.ReadFile(counter)
	if got := strings.TrimSpace(string(data)); got != strconv.Itoa(workers*rounds) {
		t.Fatalf("counter = %s, want %d", got, workers*rounds)
	}
	tokens := make(map[int]uint64)
	lines, _ := os.ReadFile(log)
	for _, line := range strings.Split(strings.TrimSpace(string(lines)), "\n") {
		var n int
		var tok uint64
		if _, err := fmt.Sscan(line, &n, &tok); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if _, dup := tokens[n]; dup {
			t.Fatalf("value %d read twice: two holders at once", n)
		}
		tokens[n] = tok
	}
	for n := 1; n < workers*rounds; n++ {
		if tokens[n] <= tokens[n-1] {
			t.Fatalf("token of increment %d is %d, not above %d", n, tokens[n], tokens[n-1])
		}
	}
	t.Logf("%d sema run processes in %v", workers*rounds, time.Since(start).Round(time.Millisecond))
}

// waitQueued waits until name has n waiters, as b sees them.
func waitQueued(t testing.TB, b *postgres.Backend, name string, n int) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		st, err := b.Describe(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Waiters) >= n {
			return
		}
	}
	t.Fatalf("%q never had %d waiters", name, n)
}

// A `sema run` holder killed with SIGKILL. Killing the process the user
// started (the front) leaves its supervisor, which holds the lease, to
// kill the job and release at once; killing the supervisor leaves the
// lease to expire: the next holder gets in within the TTL + 1s. Either
// way the job is dead before anyone else gets in.
func TestKilledHolderFreesWithinTTL(t *testing.T) {
	for _, victim := range []string{"front", "supervisor"} {
		t.Run(victim, func(t *testing.T) { testKilledHolder(t, victim == "supervisor") })
	}
}

func testKilledHolder(t *testing.T, supervisor bool) {
	const ttl = 2 * time.Second
	url := testenv.SharedPostgres(t).URL()
	dir := t.TempDir()
	ready, granted := filepath.Join(dir, "ready"), filepath.Join(dir, "granted")
	name := uniqueName("proc/killed")
	holder := startSema(t, "run", "--backend", url, "--ttl", ttl.String(), name, "--",
		"sh", "-c", "echo $$ $PPID > "+ready+"; exec sleep 100")
	ids := strings.Fields(waitFile(t, ready, holder))
	job, sup := ids[0], ids[1]
	waiter := startSema(t, "run", "--backend", url, "--wait", "60s", name, "--",
		"sh", "-c", `date +%s%N > `+granted+`.tmp; if kill -0 `+job+` 2>/dev/null; then echo alive; else echo dead; fi >> `+granted+`.tmp; mv `+granted+`.tmp `+granted)
	waitQueued(t, open(t, postgresConfig(url)), name, 1)

	pid := holder.cmd.Process.Pid
	if supervisor {
		pid, _ = strconv.Atoi(sup)
	}
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(waitFile(t, granted, waiter))
	at, _ := strconv.ParseInt(f[0], 10, 64)
	took := time.Unix(0, at).Sub(killed)
	if took > ttl+time.Second {
		t.Fatalf("the waiter got in %v after the kill; want within the TTL (%v) + 1s", took, ttl)
	}
	if f[1] != "dead" {
		t.Fatalf("the waiter got in while the killed holder's job still ran")
	}
	if code := waiter.exitCode(t, 30*time.Second); code != 0 {
		t.Fatalf("waiter: exit %d; stderr: %s", code, waiter.stderr.String())
	}
	t.Logf("kill -9 → next holder in %v (TTL %v)", took.Round(time.Millisecond), ttl)
}

// A `sema run` holder frozen with SIGSTOP past its TTL: another gets in
// (the database expires the lease), and when the holder is thawed it
// finds its lease's deadline gone, terminates its job and exits 76.
func TestStoppedHolderLosesLease(t *testing.T) {
	url := testenv.SharedPostgres(t).URL()
	dir := t.TempDir()
	ready, term := filepath.Join(dir, "ready"), filepath.Join(dir, "term")
	name := uniqueName("proc/stopped")
	holder := startSema(t, "run", "--backend", url, "--ttl", "1s", name, "--", "sh", "-c",
		"trap 'echo TERM > "+term+"; exit 0' TERM; echo $PPID > "+ready+"; while :; do sleep 0.05; done")
	sup, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, ready, holder)))
	if err := syscall.Kill(sup, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	_, stderr, code := runSema(t, "run", "--backend", url, "--wait", "60s", name, "--", "true")
	in := time.Since(stopped)
	if err := syscall.Kill(sup, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("second holder: exit %d; stderr: %s", code, stderr)
	}
	if code := holder.exitCode(t, 30*time.Second); code != 76 {
		t.Fatalf("thawed holder: exit %d, want 76 (lease lost); stderr: %s", code, holder.stderr.String())
	}
	if b, _ := os.ReadFile(term); strings.TrimSpace(string(b)) != "TERM" {
		t.Fatalf("the thawed holder's job was not terminated (marker %q)", b)
	}
	t.Logf("the second holder got in %v after the first was frozen", in.Round(time.Millisecond))
}
