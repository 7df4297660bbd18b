package faults

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
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
	// lazyRelease: a release commits without waiting for the disk, so a
	// crash of the server may undo it (the lease is back until it expires).
	lazyRelease bool
	// ttl of the leases, if the run's default (1 s) is below what the
	// backend accepts.
	ttl time.Duration
	// need is what the backend must declare for these faults to apply.
	need func(g sema.Guarantees) bool
}

// target is a started engine.
type target struct {
	workerURL string   // the URL workers open: through the proxies if there are any
	adminURL  string   // the URL the harness opens (describe, force-release): direct
	proxies   []*Proxy // one per server the workers reach
	// restart injects each restart fault the engine gets.
	restart map[FaultKind]func() error
}

var (
	holderFaults  = []FaultKind{FaultKillHolder, FaultKillWaiter, FaultStop, FaultForce}
	networkFaults = []FaultKind{FaultReset, FaultStall, FaultNoRead}
	restartFaults = []FaultKind{FaultCrash, FaultTerm}
	memberFaults  = []FaultKind{FaultMember, FaultLeader}
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
		name:        "serve",
		start:       startServe,
		faults:      concat(holderFaults, networkFaults, restartFaults),
		lazyRelease: true,
		need:        func(g sema.Guarantees) bool { return g.Linearizable && g.DurableFencing },
	},
	{
		// One Redis server with the append-only file fsynced at every
		// write, restarted with kill -9 and SIGTERM. Redis declares itself
		// not linearizable because of replication and failover; on one
		// server every operation is one atomic script, which the checks
		// hold it to. No replica, no failover: a failover may lose an
		// answered grant (SurvivesFailover is false).
		name:   "redis",
		start:  startRedis,
		faults: concat(holderFaults, networkFaults, restartFaults),
		need:   func(g sema.Guarantees) bool { return g.Scope == sema.ScopeCluster && g.FIFO && g.DurableFencing },
	},
	{
		// One PostgreSQL primary, restarted by a fast shutdown and by
		// kill -9 of the postmaster (crash recovery). No standby: a
		// failover keeps grants only with synchronous replication, which
		// sema does not check (SurvivesFailover is false).
		name:        "postgres",
		start:       startPostgres,
		faults:      concat(holderFaults, networkFaults, restartFaults),
		lazyRelease: true,
		need:        func(g sema.Guarantees) bool { return g.Linearizable && g.DurableFencing },
	},
	{
		// Three etcd members, each behind a proxy; a member, or the
		// leader, is killed with kill -9 and restarted on its data.
		// Linearizable and durable through leader changes.
		name:   "etcd",
		start:  startEtcd,
		faults: concat(holderFaults, networkFaults, memberFaults),
		need:   func(g sema.Guarantees) bool { return g.Linearizable && g.DurableFencing && g.SurvivesFailover },
	},
}

func startFile(t *testing.T, r *run) target {
	u := (&url.URL{Scheme: "file", Path: r.dir + "/locks"}).String()
	return target{workerURL: u, adminURL: u}
}

func startServe(t *testing.T, r *run) target {
	s := testenv.StartSemaServer(t, "--log-level", "info")
	t.Cleanup(func() { keepLog(t, s.Log, filepath.Join(r.dir, "serve.log")) })
	p := newProxy(t, s.Addr)
	return target{workerURL: "http://" + p.Addr(), adminURL: s.URL(), proxies: []*Proxy{p},
		restart: map[FaultKind]func() error{
			FaultCrash: func() error { return s.Restart(true) },
			FaultTerm:  func() error { return s.Restart(false) },
		}}
}

func startRedis(t *testing.T, r *run) target {
	rd := testenv.StartRedis(t, testenv.RedisOptions{Persist: true})
	p := newProxy(t, rd.Addr)
	return target{workerURL: "redis://" + p.Addr() + "/0", adminURL: rd.URL(), proxies: []*Proxy{p},
		restart: map[FaultKind]func() error{
			FaultCrash: func() error { rd.Restart(t, true); return nil },
			FaultTerm:  func() error { rd.Restart(t, false); return nil },
		}}
}

func startPostgres(t *testing.T, r *run) target {
	pg := testenv.StartPostgres(t)
	p := newProxy(t, pg.Addr)
	u, err := url.Parse(pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.Addr()
	return target{workerURL: u.String(), adminURL: pg.URL(), proxies: []*Proxy{p},
		restart: map[FaultKind]func() error{
			FaultCrash: func() error { return pg.RestartErr(true) },
			FaultTerm:  func() error { return pg.RestartErr(false) },
		}}
}

func startEtcd(t *testing.T, r *run) target {
	c := testenv.StartEtcd(t, 3)
	var ps []*Proxy
	var addrs []string
	for _, m := range c.Members {
		p := newProxy(t, m.ClientAddr)
		ps = append(ps, p)
		addrs = append(addrs, p.Addr())
	}
	// A member stays down for up to a TTL: the others elect a leader, or
	// carry on without it.
	bounce := func(i int) error {
		if i < 0 {
			return fmt.Errorf("no member knows a leader")
		}
		m := c.Members[i]
		m.Kill()
		time.Sleep(r.between(0, r.cfg.ttl))
		m.Restart(t)
		return nil
	}
	return target{workerURL: "etcd://" + strings.Join(addrs, ","), adminURL: c.URL(), proxies: ps,
		restart: map[FaultKind]func() error{
			FaultMember: func() error { return bounce(r.intn(len(c.Members))) },
			FaultLeader: func() error {
				leader := c.Leader()
				for i := 0; i < 50 && leader < 0; i++ { // an election may be under way
					time.Sleep(100 * time.Millisecond)
					leader = c.Leader()
				}
				return bounce(leader)
			},
		}}
}

func newProxy(t *testing.T, addr string) *Proxy {
	p, err := NewProxy(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
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
