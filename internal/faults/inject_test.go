package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/testenv"
)

// inject injects faults until the deadline: every kind the engine allows,
// in a random order, each once per cycle, with random gaps around
// cfg.faultEvery.
func (r *run) inject(deadline time.Time) {
	var cycle []FaultKind
	for time.Now().Before(deadline) && !r.broken {
		if len(cycle) == 0 {
			cycle = append(cycle, r.eng.faults...)
			for i := len(cycle) - 1; i > 0; i-- {
				j := r.intn(i + 1)
				cycle[i], cycle[j] = cycle[j], cycle[i]
			}
		}
		k := cycle[0]
		cycle = cycle[1:]
		gap := r.between(r.cfg.faultEvery/2, 3*r.cfg.faultEvery/2)
		if !r.injectOne(k) { // nothing to hit now: try it again later
			cycle = append(cycle, k)
			gap = r.cfg.faultEvery / 10
		}
		time.Sleep(min(gap, time.Until(deadline)))
	}
}

// injectOne injects one fault of kind k; false if it found nothing to hit
// (no holder, no waiter, no connection).
func (r *run) injectOne(k FaultKind) bool {
	switch k {
	case FaultKillHolder, FaultKillWaiter, FaultStop:
		p := r.victim(k == FaultKillWaiter)
		if p == nil {
			return false
		}
		if k == FaultStop {
			return r.stop(p)
		}
		t := r.kill(p, true)
		r.fault(Fault{Kind: k, T: t, End: t, Client: p.n})
	case FaultForce:
		name := r.heldName()
		if name == "" {
			return false
		}
		r.bg.Add(1)
		go func() { // the command takes a while to start: faults go on meanwhile
			defer r.bg.Done()
			r.force(name)
		}()
	case FaultCrash, FaultTerm, FaultMember, FaultLeader:
		t := Now()
		if err := r.tgt.restart[k](); err != nil {
			// Say so, stop injecting, and check what was recorded.
			r.t.Errorf("%s: %v", k, err)
			r.broken = true
		}
		r.fault(Fault{Kind: k, T: t, End: Now()})
	case FaultReset:
		// From before the first reset to after the last: a call answered
		// in between may have had its answer cut.
		t := Now()
		if r.intn(4) == 0 {
			var n int
			for _, p := range r.tgt.proxies {
				n += p.ResetAll()
			}
			r.fault(Fault{Kind: k, T: t, End: Now(), Note: strconv.Itoa(n) + " connections"})
			return true
		}
		ok := false
		for _, p := range r.shuffledProxies() {
			r.mu.Lock()
			ok = p.ResetOne(r.rng)
			r.mu.Unlock()
			if ok {
				break
			}
		}
		if !ok {
			return false
		}
		r.fault(Fault{Kind: k, T: t, End: Now()})
	case FaultStall, FaultNoRead:
		dir := Both
		if k == FaultNoRead {
			dir = Down
		}
		t := Now()
		var end func(reset bool)
		for _, p := range r.shuffledProxies() {
			r.mu.Lock()
			end = p.Pause(r.rng, dir)
			r.mu.Unlock()
			if end != nil {
				break
			}
		}
		if end == nil {
			return false
		}
		d := r.between(r.cfg.ttl/4, r.cfg.maxPause())
		doReset := r.intn(2) == 0
		r.bg.Add(1)
		go func() {
			defer r.bg.Done()
			time.Sleep(d)
			end(doReset)
			note := "resumed"
			if doReset {
				note = "then reset"
			}
			r.fault(Fault{Kind: k, T: t, End: Now(), Note: note})
		}()
	}
	return true
}

// victim finds, through Describe, a worker that holds (or waits for) a
// random name.
func (r *run) victim(waiter bool) *proc {
	for range 3 {
		st, ok := r.describe(r.randomName())
		if !ok {
			continue
		}
		var pids []int
		if waiter {
			for _, w := range st.Waiters {
				pids = append(pids, w.PID)
			}
		} else {
			for _, h := range st.Holders {
				pids = append(pids, h.PID)
			}
		}
		for _, i := range r.perm(len(pids)) {
			if p := r.byPID(pids[i]); p != nil && !p.isStopped(r) {
				return p
			}
		}
	}
	return nil
}

// heldName finds, through Describe, a name with holders.
func (r *run) heldName() string {
	for range 3 {
		name := r.randomName()
		if st, ok := r.describe(name); ok && len(st.Holders) > 0 {
			return name
		}
	}
	return ""
}

// shuffledProxies returns the target's proxies in a random order.
func (r *run) shuffledProxies() []*Proxy {
	ps := make([]*Proxy, 0, len(r.tgt.proxies))
	for _, i := range r.perm(len(r.tgt.proxies)) {
		ps = append(ps, r.tgt.proxies[i])
	}
	return ps
}

func (r *run) perm(n int) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.Perm(n)
}

func (p *proc) isStopped(r *run) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return p.stopped
}

// stop freezes a worker with SIGSTOP for longer than a TTL, then continues
// it: its lease expires meanwhile, and it writes to the resource when it
// wakes.
func (r *run) stop(p *proc) bool {
	r.mu.Lock()
	if r.procs[p.n] != p || p.stopped {
		r.mu.Unlock()
		return false
	}
	p.stopped = true
	t := Now()
	_ = p.cmd.Process.Signal(syscall.SIGSTOP)
	r.mu.Unlock()
	d := r.between(6*r.cfg.ttl/5, 5*r.cfg.ttl/2)
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		select {
		case <-time.After(d):
		case <-p.done:
		}
		r.mu.Lock()
		p.stopped = false
		if r.procs[p.n] == p {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
		}
		r.mu.Unlock()
		r.fault(Fault{Kind: FaultStop, T: t, End: Now(), Client: p.n})
	}()
	return true
}

// force force-releases every holder of name, as an operator would: half
// the time plainly (the permits stay taken until the old holders'
// deadlines), half the time with --now (they free at once); half the time
// with `sema release --force NAME`, half the time through the library's
// Client.ForceRelease (what the command calls), whose call the history
// can place more precisely than a process's start.
func (r *run) force(name string) {
	op := &Op{Type: OpForce, Name: name, Limit: limitOf(name), Call: Now(), Now: r.intn(2) == 0}
	if r.intn(2) == 0 {
		r.forceCommand(op)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 2*r.cfg.ttl)
		var opts []sema.ForceOption
		if op.Now {
			opts = append(opts, sema.ForceNow())
		}
		hs, err := r.admin.ForceRelease(ctx, name, "", opts...)
		cancel()
		op.Ret = Now()
		switch {
		case err == nil:
			op.Res = ResOK
		case errors.Is(err, sema.ErrNotHeld):
			op.Res = ResNotHeld
		default:
			op.Res, op.Err = ResUnknown, err.Error()
		}
		for _, h := range hs {
			op.Seen = append(op.Seen, Seen{ID: h.ID, Token: h.Token, Weight: h.Weight})
		}
	}
	r.addOp(op)
	r.fault(Fault{Kind: FaultForce, T: op.Call, End: op.Ret, Note: name})
	// Look again, as an operator checking that it took effect would:
	// after the old holders' next renewals, which must have failed.
	for range 2 {
		time.Sleep(r.cfg.ttl / 3)
		r.describe(name)
	}
}

// released matches the lines of `sema release --force`.
var released = regexp.MustCompile(`(?m)^released ".*" lease (\S*) \(owner .*, token (\d+), weight (\d+),`)

func (r *run) forceCommand(op *Op) {
	args := []string{"release", "--force", "--backend", r.tgt.adminURL, op.Name}
	if op.Now {
		args = append(args, "--now")
	}
	cmd := exec.Command(testenv.SemaBinary(r.t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	op.Ret = Now()
	var exit *exec.ExitError
	switch {
	case err == nil && released.MatchString(stdout.String()):
		op.Res = ResOK
		for _, m := range released.FindAllStringSubmatch(stdout.String(), -1) {
			tok, _ := strconv.ParseUint(m[2], 10, 64)
			w, _ := strconv.ParseInt(m[3], 10, 64)
			op.Seen = append(op.Seen, Seen{ID: m[1], Token: tok, Weight: w})
		}
	case errors.As(err, &exit) && exit.ExitCode() == 1 && bytes.Contains(stderr.Bytes(), []byte("is not held")):
		op.Res = ResNotHeld
	default:
		op.Res = ResUnknown
		op.Err = fmt.Sprintf("%v: %s%s", err, stdout.Bytes(), stderr.Bytes())
	}
}
