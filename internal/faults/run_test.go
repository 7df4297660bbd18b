package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

// workerEnv carries a WorkerConfig to a re-executed test binary.
const workerEnv = "SEMA_FAULTS_WORKER"

// runConfig sizes a run.
type runConfig struct {
	dur        time.Duration // how long the workers work
	ttl        time.Duration // of every lease
	workers    int           // worker processes at any time
	epoch      time.Duration // names change every epoch (0: never)
	faultEvery time.Duration // mean gap between faults
	seed       uint64
}

// maxPause is the longest connection pause injected: the slack of
// operations whose outcome is unknown is this plus a second.
func (c runConfig) maxPause() time.Duration { return 3 * c.ttl / 2 }

// names are the semaphores of every run: a mutex and two semaphores.
var names = []NameSpec{{"m", 1}, {"s2", 2}, {"s3", 3}}

// run is one fault run against one engine.
type run struct {
	t      *testing.T
	eng    engine
	cfg    runConfig
	dir    string
	resDir string
	tgt    target
	admin  *sema.Client
	start  int64
	bg     sync.WaitGroup // fault goroutines (continued stops, ended pauses)
	broken bool           // the engine did not come back from a restart

	mu     sync.Mutex
	rng    *rand.Rand
	procs  map[int]*proc
	next   int
	deaths map[int]int64
	faults []Fault
	ops    []*Op
}

// proc is a worker process.
type proc struct {
	n       int
	cmd     *exec.Cmd
	done    chan struct{}
	stopped bool // SIGSTOP sent, SIGCONT not yet
}

func newRun(t *testing.T, eng engine, cfg runConfig, dir string) *run {
	r := &run{t: t, eng: eng, cfg: cfg, dir: dir, resDir: filepath.Join(dir, "resource"),
		rng: rand.New(rand.NewPCG(cfg.seed, 1)), procs: map[int]*proc{}, deaths: map[int]int64{}}
	for _, d := range []string{r.resDir, filepath.Join(dir, "locks")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func (r *run) intn(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.IntN(n)
}

// between returns a random duration in [lo, hi].
func (r *run) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.intn(int(hi-lo)+1))
}

func (r *run) fault(f Fault) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = append(r.faults, f)
}

func (r *run) addOp(o *Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, o)
}

// spawn starts a worker process.
func (r *run) spawn() {
	r.mu.Lock()
	r.next++
	n := r.next
	r.mu.Unlock()
	cfg := WorkerConfig{URL: r.tgt.workerURL, Journal: r.journal(n), Resource: r.resDir, Names: names,
		TTL: r.cfg.ttl, Seed: r.cfg.seed + uint64(n), Start: r.start, Epoch: r.cfg.epoch}
	b, err := json.Marshal(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"="+string(b), "GORACE=halt_on_error=1")
	logf, err := os.Create(filepath.Join(r.dir, fmt.Sprintf("w%d.log", n)))
	if err != nil {
		r.t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	p := &proc{n: n, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	r.mu.Lock()
	r.procs[n] = p
	r.mu.Unlock()
}

func (r *run) journal(n int) string { return filepath.Join(r.dir, fmt.Sprintf("w%d.jsonl", n)) }

// byPID returns the live worker with that PID.
func (r *run) byPID(pid int) *proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.procs {
		if p.cmd.Process.Pid == pid {
			return p
		}
	}
	return nil
}

// kill kills a worker with SIGKILL, records when (just before the signal:
// it does nothing after that) and, if respawn, starts another in its place.
func (r *run) kill(p *proc, respawn bool) int64 {
	r.mu.Lock()
	if r.procs[p.n] != p {
		r.mu.Unlock()
		return 0
	}
	delete(r.procs, p.n)
	t := Now()
	r.deaths[p.n] = t
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	r.mu.Unlock()
	<-p.done
	if respawn {
		r.spawn()
	}
	return t
}

// describe asks the backend who holds and waits for name, recording it.
func (r *run) describe(name string) (sema.Status, bool) {
	op := &Op{Type: OpDescribe, Name: name, Limit: limitOf(name), Call: Now()}
	ctx, cancel := context.WithTimeout(context.Background(), 2*r.cfg.ttl)
	defer cancel()
	st, err := r.admin.Describe(ctx, name)
	op.Ret = Now()
	if err != nil {
		op.Res, op.Err = ResUnknown, err.Error()
		r.addOp(op)
		return st, false
	}
	op.Res = ResOK
	for _, h := range st.Holders {
		op.Seen = append(op.Seen, Seen{ID: h.ID, Token: h.Token, Weight: h.Weight, PID: h.PID, Forced: h.ForceReleased})
	}
	for _, w := range st.Waiters {
		op.Seen = append(op.Seen, Seen{Weight: w.Weight, PID: w.PID, Waiter: true})
	}
	r.addOp(op)
	return st, true
}

// limitOf returns the limit of a name (with its epoch suffix).
func limitOf(name string) int64 {
	for _, s := range names {
		if len(name) > len(s.Name) && name[:len(s.Name)+1] == s.Name+"@" {
			return s.Limit
		}
	}
	return 0
}

// randomName returns one of the names the workers use now.
func (r *run) randomName() string {
	spec := names[r.intn(len(names))]
	var epoch int64
	if r.cfg.epoch > 0 {
		epoch = (Now() - r.start) / int64(r.cfg.epoch)
	}
	return EpochName(spec, epoch)
}

// openAdmin opens the harness's own client, directly on the engine.
func (r *run) openAdmin() {
	b, err := sema.Open(context.Background(), r.tgt.adminURL)
	if err != nil {
		r.t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(r.dir, "harness.log"))
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { logf.Close() })
	r.admin = sema.New(b, sema.WithLogger(slog.New(slog.NewTextHandler(logf, nil)))) // its audit lines
	r.t.Cleanup(func() { r.admin.Close() })
	if g := r.admin.Guarantees(); !r.eng.need(g) {
		r.t.Fatalf("%s declares %+v: the faults the harness injects on it assume more", r.eng.name, g)
	}
}

// sample describes a random name every few tens of milliseconds until
// stop is closed.
func (r *run) sample(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(r.between(r.cfg.ttl/20, r.cfg.ttl/5)):
		}
		r.describe(r.randomName())
	}
}

// finish stops the workers: SIGCONT to the stopped ones, SIGTERM to all
// (they release what they hold, journal their exit and close their client,
// which may end a lease they abandoned), SIGKILL after 10 s.
func (r *run) finish() int64 {
	r.bg.Wait()
	r.mu.Lock()
	procs := make([]*proc, 0, len(r.procs))
	for _, p := range r.procs {
		procs = append(procs, p)
	}
	r.mu.Unlock()
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(10 * time.Second)
	for _, p := range procs {
		select {
		case <-p.done:
		case <-deadline:
			r.t.Errorf("worker %d did not exit 10 s after SIGTERM: killed", p.n)
			r.kill(p, false)
		}
	}
	return Now()
}

// kept is what the harness itself recorded, saved beside the workers'
// journals so that SEMA_FAULTS_CHECK can check a kept run again.
type kept struct {
	Start, End int64
	Workers    int
	Ops        []*Op
	Faults     []Fault
	Deaths     map[int]int64
	Options    Options
}

// save writes the harness's records to the run's directory.
func (r *run) save(end int64, o Options) {
	k := kept{Start: r.start, End: end, Workers: r.next, Ops: r.ops, Faults: r.faults, Deaths: r.deaths, Options: o}
	b, err := json.Marshal(&k)
	if err == nil {
		err = os.WriteFile(filepath.Join(r.dir, "harness.json"), b, 0o644)
	}
	if err != nil {
		r.t.Fatal(err)
	}
}

// loadHistory reads what a run recorded in dir.
func loadHistory(dir string) (*History, kept, error) {
	var k kept
	b, err := os.ReadFile(filepath.Join(dir, "harness.json"))
	if err == nil {
		err = json.Unmarshal(b, &k)
	}
	if err != nil {
		return nil, k, err
	}
	journals := map[int][]Rec{}
	for n := 1; n <= k.Workers; n++ {
		recs, err := ReadJournal(filepath.Join(dir, fmt.Sprintf("w%d.jsonl", n)))
		if err != nil && !os.IsNotExist(err) {
			return nil, k, err
		}
		journals[n] = recs
	}
	res, err := ReadResource(filepath.Join(dir, "resource"))
	if err != nil {
		return nil, k, err
	}
	h, err := Build(k.Start, k.End, journals, k.Ops, k.Faults, res, k.Deaths)
	return h, k, err
}
