package faults

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema/internal/testenv"
)

func TestMain(m *testing.M) {
	if s := os.Getenv(workerEnv); s != "" {
		var cfg WorkerConfig
		if err := json.Unmarshal([]byte(s), &cfg); err != nil {
			fmt.Fprintf(os.Stderr, "worker: %v\n", err)
			os.Exit(2)
		}
		os.Exit(RunWorker(cfg))
	}
	testenv.Main(m)
}

// TestFaults runs every backend under faults — worker processes killed,
// frozen past their TTL, force-released; the server killed and restarted;
// connections reset and paused — and checks the recorded history: tokens,
// overlap, fencing, what Describe showed, and linearizability.
func TestFaults(t *testing.T) {
	cfg := configFromEnv(t)
	only := os.Getenv("SEMA_FAULTS_BACKENDS")
	for _, eng := range engines {
		if only != "" && !slices.Contains(strings.Split(only, ","), eng.name) {
			continue
		}
		// Two engines at a time (-parallel, GOMAXPROCS by default): the
		// workers mostly sleep through their holds.
		t.Run(eng.name, func(t *testing.T) { t.Parallel(); runEngine(t, eng, cfg) })
	}
}

// configFromEnv is the quick mode, or the long mode that
// SEMA_FAULTS_DURATION asks for (see the package documentation).
func configFromEnv(t *testing.T) runConfig {
	cfg := runConfig{dur: 12 * time.Second, ttl: time.Second, workers: 5, faultEvery: 400 * time.Millisecond,
		seed: uint64(time.Now().UnixNano())}
	if s := os.Getenv("SEMA_FAULTS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("SEMA_FAULTS_DURATION=%q: want a duration such as 10m", s)
		}
		cfg.dur, cfg.epoch = d, 30*time.Second
	}
	if s := os.Getenv("SEMA_FAULTS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SEMA_FAULTS_SEED=%q: want a number", s)
		}
		cfg.seed = seed
	}
	return cfg
}

func runEngine(t *testing.T, eng engine, cfg runConfig) {
	if eng.ttl > 0 {
		cfg.ttl = eng.ttl
	}
	dir, err := os.MkdirTemp("", "sema-faults-"+eng.name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("SEMA_FAULTS_KEEP") != "" {
			t.Logf("journals, resource logs, worker logs and visualizations kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	r := newRun(t, eng, cfg, dir)
	testenv.SemaBinary(t) // built now, not in the first force-release
	r.tgt = eng.start(t, r)
	r.openAdmin()
	t.Logf("seed %d (SEMA_FAULTS_SEED to repeat the same choices)", cfg.seed)
	r.start = Now()
	for range cfg.workers {
		r.spawn()
	}
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { r.sample(stop); close(sampled) }()
	r.inject(time.Now().Add(cfg.dur))
	close(stop)
	<-sampled
	end := r.finish()
	r.checkLogs()
	o := Options{FreesOnDeath: eng.freesOnDeath, LazyRelease: eng.lazyRelease, Slack: int64(cfg.maxPause() + time.Second)}
	r.save(end, o)
	h, _, err := loadHistory(dir)
	if err != nil {
		t.Fatal(err)
	}
	checked := time.Now()
	vs, fs := CheckAll(h, o, dir, time.Minute+cfg.dur/4)
	t.Logf("%s; checked in %v", summary(h, fs), time.Since(checked).Round(time.Millisecond))
	if grants := len(h.Leases); grants < minGrants(cfg) {
		t.Errorf("only %d leases granted in %v: too few for the run to prove anything", grants, cfg.dur)
	}
	report(t, h, vs)
}

// minGrants is the fewest leases a run must see granted: a run in which
// the workers could not work is a failure, not a pass. Five workers take
// a few leases a second each on every backend.
func minGrants(cfg runConfig) int { return int(cfg.dur / time.Second) }

func report(t *testing.T, h *History, vs []Violation) {
	for _, v := range vs {
		t.Errorf("%s violation, caught at +%s of the run:\n%s", v.Check, dur(v.At-h.Start), v.Msg)
	}
}

// TestCheckKept checks again the run kept in $SEMA_FAULTS_CHECK (a
// directory a failed run, or one with SEMA_FAULTS_KEEP set, printed).
func TestCheckKept(t *testing.T) {
	dir := os.Getenv("SEMA_FAULTS_CHECK")
	if dir == "" {
		t.Skip("SEMA_FAULTS_CHECK names no kept run")
	}
	h, k, err := loadHistory(dir)
	if err != nil {
		t.Fatal(err)
	}
	vs, fs := CheckAll(h, k.Options, dir, 10*time.Minute)
	t.Logf("%s", summary(h, fs))
	report(t, h, vs)
}

// checkLogs fails the test if a worker's log shows a data race or a panic.
func (r *run) checkLogs() {
	logs, _ := filepath.Glob(filepath.Join(r.dir, "w*.log"))
	for _, p := range logs {
		b, err := os.ReadFile(p)
		if err != nil {
			r.t.Fatal(err)
		}
		// A worker says "worker: …" when it gives up: the run would
		// prove less than it claims.
		if strings.Contains(string(b), "DATA RACE") || strings.Contains(string(b), "panic:") || strings.Contains(string(b), "worker: ") {
			r.t.Errorf("%s:\n%s", filepath.Base(p), b)
		}
	}
}

// summary says what a run did, in one paragraph.
func summary(h *History, fs FencingStats) string {
	faults := map[FaultKind]int{}
	for _, f := range h.Faults {
		faults[f.Kind]++
	}
	byType := map[string]int{}
	for _, o := range h.Ops {
		byType[string(o.Type)+" "+string(o.Res)]++
	}
	keys := make([]string, 0, len(byType))
	for k := range byType {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%v of work: %d operations (", time.Duration(h.End-h.Start).Round(time.Second), len(h.Ops))
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, byType[k])
	}
	fmt.Fprintf(&b, "), %d leases, %d worker processes killed", len(h.Leases), len(h.Deaths))
	var total int
	kinds := make([]string, 0, len(faults))
	for k, n := range faults {
		total += n
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(kinds)
	fmt.Fprintf(&b, "; %d faults (%s)", total, strings.Join(kinds, ", "))
	fmt.Fprintf(&b, "; resource: %d writes, %d rejected; %d written after a stall (%d rejected); %d after the writer's belief ended (%d rejected)",
		fs.Writes, fs.Rejected, fs.StallWrites, fs.StallReject, fs.Stale, fs.StaleRejected)
	return b.String()
}
