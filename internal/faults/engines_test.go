package faults

import (
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/testenv"
)

// engine is a backend the harness runs: how to start it and which faults
// apply. To add a backend, add an entry: start its engine (internal/testenv
// has Redis, PostgreSQL and etcd), put a Proxy in front of it if it is
// reached over the network, give restart if it can be restarted, and list
// the faults its Guarantees cover.
type engine struct {
	name   string
	start  func(t *testing.T, r *run) target
	faults []FaultKind
	// freesOnDeath: a killed holder's permits are free at once.
	freesOnDeath bool
	// ttl of the leases, if the run's default (1 s) is below what the
	// backend accepts.
	ttl time.Duration
	// need is what the backend must declare for these faults to apply.
	need func(g sema.Guarantees) bool
}

// target is a started engine.
type target struct {
	workerURL string // the URL workers open: through the proxy if there is one
	adminURL  string // the URL the harness opens (describe, force-release): direct
	proxy     *Proxy
	restart   func(crash bool) error // nil: no server to restart
}

var (
	holderFaults  = []FaultKind{FaultKillHolder, FaultKillWaiter, FaultStop, FaultForce}
	networkFaults = []FaultKind{FaultReset, FaultStall, FaultNoRead}
	restartFaults = []FaultKind{FaultCrash, FaultTerm}
)

func concat(lists ...[]FaultKind) []FaultKind {
	var out []FaultKind
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

var engines = []engine{
	{
		// One host, no daemon: no network and no server to restart. The
		// kernel frees a dead holder's permits at once.
		name:         "file",
		start:        startFile,
		faults:       holderFaults,
		freesOnDeath: true,
		need:         func(g sema.Guarantees) bool { return g.Scope == sema.ScopeHost && g.Linearizable && g.DurableFencing },
	},
	{
		// sema serve on its embedded store, restarted with kill -9 and
		// SIGTERM on the same data directory, reached through the proxy.
		name:   "serve",
		start:  startServe,
		faults: concat(holderFaults, networkFaults, restartFaults),
		need:   func(g sema.Guarantees) bool { return g.Linearizable && g.DurableFencing },
	},
}

func startFile(t *testing.T, r *run) target {
	u := (&url.URL{Scheme: "file", Path: r.dir + "/locks"}).String()
	return target{workerURL: u, adminURL: u}
}

func startServe(t *testing.T, r *run) target {
	s := testenv.StartSemaServer(t, "--log-level", "info")
	t.Cleanup(func() { keepLog(t, s.Log, filepath.Join(r.dir, "serve.log")) })
	p, err := NewProxy(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return target{workerURL: "http://" + p.Addr(), adminURL: s.URL(), proxy: p, restart: s.Restart}
}

// keepLog copies an engine's log into the run's directory.
func keepLog(t *testing.T, from, to string) {
	b, err := os.ReadFile(from)
	if err == nil {
		err = os.WriteFile(to, b, 0o644)
	}
	if err != nil {
		t.Logf("keeping %s: %v", from, err)
	}
}
