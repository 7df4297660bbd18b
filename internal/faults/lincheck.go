package faults

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// model is the porcupine model of one name (see model.go).
var model = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{&mState{}} },
	Step: func(state, input, _ any) []any {
		var out []any
		for _, s := range step(state.(*mState), input.(*mInput)) {
			out = append(out, s)
		}
		return out
	},
	Equal: func(a, b any) bool { return a.(*mState).equal(b.(*mState)) },
	Hash:  func(s any) uint64 { return s.(*mState).hash() },
	DescribeOperation: func(input, _ any) string {
		in := input.(*mInput)
		if in.op == nil {
			return string(in.fault)
		}
		if in.cut {
			return in.op.String() + " (cut: outcome unknown)"
		}
		return in.op.String()
	},
	DescribeState: func(s any) string { return s.(*mState).String() },
}).ToModel()

// modelOps turns the operations on name into porcupine operations.
func (h *History) modelOps(name string, o Options) []porcupine.Operation {
	lanes := map[int]int{}
	lane := func(c int) int {
		if _, ok := lanes[c]; !ok {
			lanes[c] = len(lanes)
		}
		return lanes[c]
	}
	var ttl int64
	for _, l := range h.Leases {
		if l.Name == name {
			ttl = max(ttl, l.TTL)
		}
	}
	// Acquires whose outcome is unknown may have left a lease nobody
	// knows: it only ever explains a TryAcquire that found the permits
	// taken, so it is counted there rather than kept in the state.
	type ghost struct{ call, expire, w int64 }
	var ghosts []ghost
	for _, op := range h.Ops {
		if op.Name == name && (op.Type == OpTry || op.Type == OpAcquire) && op.Res == ResUnknown {
			e := op.Ret + o.Slack + op.TTL + o.Slack
			if d, ok := h.Ends[op.Client]; ok && o.FreesOnDeath {
				e = min(e, d+o.Slack)
			}
			ghosts = append(ghosts, ghost{op.Call, e, op.Weight})
		}
	}
	durable := h.durableAfter()
	var out []porcupine.Operation
	add := func(in *mInput, ret int64, client int) {
		out = append(out, porcupine.Operation{ClientId: lane(client), Input: in, Call: in.call, Return: max(ret, in.call),
			Output: ""})
	}
	for _, op := range h.Ops {
		if op.Name != name {
			continue
		}
		in := &mInput{op: op, id: op.ID, weight: op.Weight, limit: h.Limits[name], token: op.Token, call: op.Call, ret: op.Ret}
		l := h.Leases[op.ID]
		ret := op.Ret
		unknown := func(k mKind) { in.kind, ret = k, op.Ret+o.Slack }
		switch {
		case (op.Type == OpTry || op.Type == OpAcquire) && op.Res == ResOK:
			in.kind, in.drop, in.expire = mGrant, l.dropAt(op.Deadline, o), l.expireBy(h, o)
		case op.Type == OpTry && op.Res == ResHeld:
			in.kind, in.queued, in.fenced = mHeld, h.waiterDuring(op, o), h.restartDuring(op, ttl, o)
			for _, g := range ghosts {
				if g.call < op.Ret && g.expire > op.Call {
					in.ghosts += g.w
				}
			}
		case op.Type == OpRefresh && op.Res == ResOK:
			in.kind, in.drop = mRefreshOK, l.dropAt(op.Deadline, o)
		case op.Type == OpRefresh && op.Res == ResLost:
			in.kind = mRefreshLost
		case op.Type == OpRelease && op.Res == ResOK:
			in.kind = mReleaseOK
			if o.LazyRelease {
				in.durable = durable(op.Ret)
			}
		case op.Type == OpRelease && op.Res == ResNotHeld && h.brokenDuring(op):
			// The library sends a request again when the connection broke
			// before its answer came: if the first one took effect, the
			// release reports the lease gone although it was there.
			unknown(mReleaseMay)
		case op.Type == OpRelease && op.Res == ResNotHeld:
			in.kind = mReleaseGone
		case op.Type == OpRelease && (op.Res == ResUnknown || op.Res == ResEnded):
			// A release after the lease ended (force-released, expired)
			// may still free permits its lease kept taken.
			unknown(mReleaseMay)
		case op.Type == OpForce && op.Res == ResNotHeld && h.brokenDuring(op):
			unknown(mForceMay)
		case op.Type == OpForce && (op.Res == ResOK || op.Res == ResNotHeld):
			in.kind, in.strict = mForce, !op.Now
			for _, s := range op.Seen {
				if h.Leases[s.ID] != nil {
					in.freed = append(in.freed, s.ID)
				}
			}
		case op.Type == OpForce && op.Res == ResUnknown:
			unknown(mForceMay)
		default:
			continue // no effect on the backend, or nothing it proves
		}
		add(in, ret, op.Client)
	}
	for _, f := range h.Faults {
		if f.Kind.restarts() {
			k := mRestart
			if f.Kind == FaultCrash {
				k = mCrash
			}
			add(&mInput{kind: k, fault: f.Kind, limit: h.Limits[name], call: f.T, ret: f.End, after: f.End + ttl + o.Slack}, f.End, -1)
		}
	}
	slices.SortStableFunc(out, func(a, b porcupine.Operation) int { return cmpInt(a.Call, b.Call) })
	return out
}

// durableAfter returns when what was written by an operation that
// returned at t is surely on disk, for a backend whose releases do not
// wait for it (Options.LazyRelease): once a TryAcquire invoked after t
// returned granted (on any name: the log is one sequence, and an immediate
// grant waits until its record, and everything before it, is on disk; a
// hand-off to a waiter may not, on sema serve). never if none did.
func (h *History) durableAfter() func(t int64) int64 {
	type span struct{ call, ret int64 }
	var grants []span
	for _, o := range h.Ops {
		if o.Type == OpTry && o.Res == ResOK {
			grants = append(grants, span{o.Call, o.Ret})
		}
	}
	slices.SortFunc(grants, func(a, b span) int { return cmpInt(a.call, b.call) })
	// firstRet[i]: the earliest return among grants[i:]
	firstRet := make([]int64, len(grants)+1)
	firstRet[len(grants)] = never
	for i := len(grants) - 1; i >= 0; i-- {
		firstRet[i] = min(grants[i].ret, firstRet[i+1])
	}
	return func(t int64) int64 {
		i, _ := slices.BinarySearchFunc(grants, t+1, func(g span, t int64) int { return cmpInt(g.call, t) })
		return firstRet[i]
	}
}

// brokenDuring reports whether a connection was reset or paused, or the
// server restarted, while op ran.
func (h *History) brokenDuring(op *Op) bool {
	for _, f := range h.Faults {
		switch f.Kind {
		case FaultReset, FaultStall, FaultNoRead, FaultCrash, FaultTerm, FaultMember, FaultLeader:
			if f.T <= op.Ret && f.End >= op.Call {
				return true
			}
		}
	}
	return false
}

// restartDuring reports whether op ran while a server restart may have
// kept permits taken: from the restart until one TTL after the server
// answered again (the recovery fence, leases whose end was not on disk).
func (h *History) restartDuring(op *Op, ttl int64, o Options) bool {
	for _, f := range h.Faults {
		if f.Kind.restarts() && f.T < op.Ret && f.End+ttl+o.Slack > op.Call {
			return true
		}
	}
	return false
}

// dropAt is when a lease with local deadline d may be gone from the
// backend: after d, or at once once its process died if the backend frees
// a dead holder's permits.
func (l *Lease) dropAt(d int64, o Options) int64 {
	if o.FreesOnDeath {
		return min(d, l.Death)
	}
	return d
}

// expireBy is when the backend surely no longer holds l: one TTL (and
// the slack) after the last request that could have renewed it reached
// the backend. A keepalive lease renews itself until it ends.
func (l *Lease) expireBy(h *History, o Options) int64 {
	last := l.Grant.Ret
	for _, op := range l.Ops {
		if op.Type != OpRefresh {
			continue
		}
		if op.Res == ResUnknown {
			last = max(last, op.Ret+o.Slack)
		} else {
			last = max(last, op.Ret)
		}
	}
	if l.Keep {
		end := min(l.Done, l.Death, h.End)
		for _, op := range l.Ops {
			if op.Type == OpRelease {
				end = min(end, op.Ret)
			}
		}
		last = max(last, end+o.Slack)
	}
	e := last + l.TTL + o.Slack
	if o.FreesOnDeath && l.Death != never {
		e = min(e, l.Death+o.Slack)
	}
	return e
}

// waiterDuring reports whether a blocking acquire on op's name may have
// been queued while op ran.
func (h *History) waiterDuring(op *Op, o Options) bool {
	for _, y := range h.Ops {
		if y.Call >= op.Ret {
			break
		}
		if y == op || y.Name != op.Name || y.Type != OpAcquire {
			continue
		}
		end := y.Ret
		if y.Res != ResOK {
			end += o.Slack
		}
		if end > op.Call {
			return true
		}
	}
	return false
}

// unknownPrefix returns the operations invoked up to t, those that
// returned after t turned into operations whose outcome is unknown (a
// grant into a lease nobody knows, counted by the TryAcquires that found
// the permits taken after its call). If the whole history is
// linearizable, so is every such prefix: so an illegal prefix is a
// shorter witness of the same violation.
func unknownPrefix(ops []porcupine.Operation, t int64) []porcupine.Operation {
	var out []porcupine.Operation
	var cut []*mInput // grants cut to an unknown outcome
	for _, op := range ops {
		if op.Call > t {
			break
		}
		in := op.Input.(*mInput)
		if op.Return > t && in.op != nil {
			c := *in
			c.cut = true
			switch in.kind {
			case mGrant:
				cut = append(cut, in)
				continue
			case mReleaseOK, mReleaseGone, mRefreshLost:
				c.kind = mReleaseMay
			case mForce:
				c.kind = mForceMay
			case mReleaseMay, mForceMay:
			default: // held, refresh ok: no effect of their own
				continue
			}
			op.Input = &c
		}
		out = append(out, op)
	}
	for i, op := range out {
		in := op.Input.(*mInput)
		if in.kind != mHeld {
			continue
		}
		c := *in
		for _, g := range cut {
			if g.call < in.ret {
				c.ghosts += g.weight
			}
		}
		out[i].Input = &c
	}
	return out
}

// CheckLinearizable checks the history of each name against the model. A
// partition that cannot be linearized is shrunk to the shortest prefix
// that cannot either, written as porcupine's visualization to a file in
// dir, and reported.
func CheckLinearizable(h *History, o Options, dir string, timeout time.Duration) []Violation {
	var out []Violation
	names := make([]string, 0, len(h.Limits))
	for n := range h.Limits {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		ops := h.modelOps(name, o)
		res, _ := porcupine.CheckOperationsVerbose(model, ops, timeout)
		switch res {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			out = append(out, Violation{"linearizability", name, h.End, fmt.Sprintf(
				"%q: the checker gave up after %v on %d operations: no verdict (a failure, not a pass)", name, timeout, len(ops))})
			continue
		}
		// Shrink: the shortest illegal prefix, by binary search on the
		// cut time (at the last return, nothing is cut: the whole history).
		// A step that times out counts as legal: the result is then a
		// longer prefix, never a wrong one.
		var cuts []int64
		for _, op := range ops {
			cuts = append(cuts, op.Return)
		}
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
		lo, hi := -1, len(cuts)-1 // the prefix cut at cuts[hi] is illegal
		for lo+1 < hi {
			mid := (lo + hi) / 2
			if porcupine.CheckOperationsTimeout(model, unknownPrefix(ops, cuts[mid]), min(timeout, 10*time.Second)) == porcupine.Illegal {
				hi = mid
			} else {
				lo = mid
			}
		}
		short := unknownPrefix(ops, cuts[hi])
		_, info := porcupine.CheckOperationsVerbose(model, short, timeout)
		var anns []porcupine.Annotation
		for _, f := range h.Faults {
			anns = append(anns, porcupine.Annotation{Tag: "faults", Start: f.T, End: max(f.End, f.T),
				Description: string(f.Kind), Details: f.Note})
		}
		info.AddAnnotations(anns)
		file := filepath.Join(dir, "linearizability-"+strings.NewReplacer("/", "_", "@", "_").Replace(name)+".html")
		if err := porcupine.VisualizePath(model, info, file); err != nil {
			file = "(visualization not written: " + err.Error() + ")"
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%q: not linearizable; the shortest failing prefix has %d operations (of %d), visualized in %s; its last ones:",
			name, len(short), len(ops), file)
		from := max(0, len(short)-25)
		for _, op := range short[from:] {
			in := op.Input.(*mInput)
			desc := model.DescribeOperation(in, nil)
			fmt.Fprintf(&b, "\n  [+%s, +%s] %s", dur(op.Call-h.Start), dur(op.Return-h.Start), desc)
		}
		out = append(out, Violation{"linearizability", name, cuts[hi], b.String()})
	}
	return out
}
