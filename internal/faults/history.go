package faults

import (
	"fmt"
	"maps"
	"slices"
)

// Op is one operation of a history: a worker's acquire, refresh or
// release, or the harness's describe or force-release.
type Op struct {
	Client   int // 0: the harness; n > 0: worker process n
	Seq      int64
	Type     OpType
	Name     string
	Limit    int64
	Weight   int64
	Keep     bool
	TTL      int64
	Margin   int64
	Call     int64
	Ret      int64 // for a pending operation, when its process died (or the run ended)
	Pending  bool  // its process died before it returned
	Res      Result
	ID       string // the lease (granted, refreshed, released)
	Token    uint64
	Deadline int64 // local deadline vouched for after a grant or a confirmed refresh
	Err      string
	Seen     []Seen
	Now      bool // force: with --now (the permits free at once)
}

func (o *Op) String() string {
	s := fmt.Sprintf("c%d %s %s", o.Client, o.Type, o.Name)
	switch o.Type {
	case OpTry, OpAcquire:
		s += fmt.Sprintf(" w=%d/%d", o.Weight, o.Limit)
	}
	if o.ID != "" {
		s += " lease=" + short(o.ID)
	}
	s += " → " + string(o.Res)
	if o.Pending {
		s += " (pending: its process died)"
	}
	if o.Token != 0 {
		s += fmt.Sprintf(" token=%d", o.Token)
	}
	for _, x := range o.Seen {
		if x.Waiter {
			s += fmt.Sprintf(" [waiter w=%d pid=%d]", x.Weight, x.PID)
		} else {
			s += fmt.Sprintf(" [%s token=%d w=%d]", short(x.ID), x.Token, x.Weight)
		}
	}
	return s
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// Use is one write to the fenced resource, as the resource logged it, with
// what the writer's journal adds.
type Use struct {
	ResWrite
	Name  string
	Check int64 // when the writer last saw its lease valid; 0 if unknown
	Stall bool  // written right after a stall of its process
}

// Lease is what the history knows of one granted lease.
type Lease struct {
	ID, Name string
	Limit    int64
	Weight   int64
	Token    uint64
	Client   int
	Keep     bool
	TTL      int64
	Margin   int64
	Grant    *Op
	Ops      []*Op // its refreshes and releases
	Deadline int64 // the last local deadline vouched for
	Done     int64 // when its worker saw Done close (never if not)
	Death    int64 // when its process was killed or exited (never if neither)
	Forced   int64 // call of the force-release that ended it (never if none)
	ForceOp  *Op   // that force-release
	Uses     []*Use
}

// FaultKind names an injected fault.
type FaultKind string

// Faults.
const (
	FaultKillHolder FaultKind = "kill -9 holder"
	FaultKillWaiter FaultKind = "kill -9 waiter"
	FaultStop       FaultKind = "SIGSTOP holder past TTL"
	FaultForce      FaultKind = "force-release"
	FaultCrash      FaultKind = "server kill -9 + restart"
	FaultTerm       FaultKind = "server SIGTERM + restart"
	FaultReset      FaultKind = "connection reset"
	FaultStall      FaultKind = "connection stalled"
	FaultNoRead     FaultKind = "client stops reading"
	FaultMember     FaultKind = "etcd member kill -9 + restart"
	FaultLeader     FaultKind = "etcd leader kill -9 + restart"
)

// restarts reports whether k restarts the engine (or part of it): leases
// from before may last one TTL longer, as after a leader change, and a
// TryAcquire may find permits taken meanwhile.
func (k FaultKind) restarts() bool {
	return k == FaultCrash || k == FaultTerm || k == FaultMember || k == FaultLeader
}

// Fault is one injected fault: it began at T and ended at End (the
// restarted server answered, the stopped process was continued, …).
type Fault struct {
	Kind   FaultKind
	T, End int64
	Client int // the worker hit, if any
	Note   string
}

// History is everything a run recorded, put together.
type History struct {
	Start, End int64
	Ops        []*Op // by call time
	Leases     map[string]*Lease
	Uses       map[string][]*Use // per name, in the resource's order
	Faults     []Fault
	Limits     map[string]int64
	Deaths     map[int]int64 // worker → when it was killed
	Ends       map[int]int64 // worker → when it was killed or closed its client to exit
}

// Build assembles a history from the workers' journals (by worker
// number), the harness's own operations, the injected faults, the
// resource's logs and the times the workers' processes were killed.
func Build(start, end int64, journals map[int][]Rec, harness []*Op, faults []Fault, res map[string][]ResWrite, deaths map[int]int64) (*History, error) {
	h := &History{Start: start, End: end, Leases: map[string]*Lease{}, Uses: map[string][]*Use{},
		Faults: faults, Limits: map[string]int64{}, Deaths: deaths}
	type useKey struct {
		id string
		t  int64
	}
	journalUses := map[useKey]Rec{}
	done := map[string]int64{}
	ends := maps.Clone(deaths) // when each worker's process died or exited
	for client, recs := range journals {
		death, dead := deaths[client]
		if !dead {
			death = never
		}
		open := map[int64]*Op{}
		for _, r := range recs {
			switch r.K {
			case "inv":
				o := &Op{Client: client, Seq: r.Op, Type: r.Type, Name: r.Name, Limit: r.Limit, Weight: r.Weight,
					Keep: r.Keep, TTL: r.TTL, Margin: r.Margin, Call: r.T, ID: r.ID}
				open[r.Op] = o
				h.Ops = append(h.Ops, o)
			case "ret":
				o := open[r.Op]
				if o == nil {
					return nil, fmt.Errorf("worker %d: completion of unknown operation %d", client, r.Op)
				}
				delete(open, r.Op)
				o.Ret, o.Res, o.Token, o.Deadline, o.Err = r.T, r.Res, r.Token, r.Deadline, r.Err
				if r.ID != "" {
					o.ID = r.ID
				}
			case "use":
				journalUses[useKey{r.ID, r.T}] = r
			case "done":
				done[r.ID] = r.T
			case "exit":
				if _, dead := ends[client]; !dead {
					ends[client] = r.T
				}
			}
		}
		for _, o := range open {
			o.Pending, o.Res = true, ResUnknown
			o.Ret = min(death, end)
		}
	}
	h.Ends = ends
	h.Ops = append(h.Ops, harness...)
	slices.SortFunc(h.Ops, func(a, b *Op) int { return cmpInt(a.Call, b.Call) })
	for _, o := range h.Ops {
		if o.Limit > 0 {
			h.Limits[o.Name] = o.Limit
		}
		if (o.Type == OpTry || o.Type == OpAcquire) && o.Res == ResOK {
			if h.Leases[o.ID] != nil {
				return nil, fmt.Errorf("lease ID %s granted twice", o.ID)
			}
			death, dead := ends[o.Client]
			if !dead {
				death = never
			}
			h.Leases[o.ID] = &Lease{ID: o.ID, Name: o.Name, Limit: o.Limit, Weight: o.Weight, Token: o.Token,
				Client: o.Client, Keep: o.Keep, TTL: o.TTL, Margin: o.Margin, Grant: o, Deadline: o.Deadline,
				Done: never, Death: death, Forced: never}
		}
	}
	for _, o := range h.Ops {
		if o.Type != OpRefresh && o.Type != OpRelease {
			continue
		}
		l := h.Leases[o.ID]
		if l == nil {
			return nil, fmt.Errorf("%s of a lease never granted", o)
		}
		o.Limit, o.Weight = l.Limit, l.Weight
		l.Ops = append(l.Ops, o)
		if o.Type == OpRefresh && o.Res == ResOK {
			l.Deadline = max(l.Deadline, o.Deadline)
		}
	}
	h.markForced()
	for id, t := range done {
		if l := h.Leases[id]; l != nil {
			l.Done = t
		}
	}
	for name, ws := range res {
		for _, w := range ws {
			u := &Use{ResWrite: w, Name: name}
			if r, ok := journalUses[useKey{w.ID, w.T}]; ok {
				u.Check, u.Stall = r.Check, r.Stall
			}
			h.Uses[name] = append(h.Uses[name], u)
			l := h.Leases[w.ID]
			if l == nil {
				return nil, fmt.Errorf("resource %q: a write by lease %s, never granted", name, w.ID)
			}
			if l.Token != w.Token {
				return nil, fmt.Errorf("resource %q: lease %s wrote with token %d, granted %d", name, w.ID, w.Token, l.Token)
			}
			l.Uses = append(l.Uses, u)
		}
	}
	return h, nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// markForced marks the leases each force-release reported as released.
func (h *History) markForced() {
	for _, o := range h.Ops {
		if o.Type != OpForce || o.Res != ResOK {
			continue
		}
		for _, s := range o.Seen {
			if l := h.Leases[s.ID]; l != nil && l.ForceOp == nil {
				l.Forced, l.ForceOp = o.Call, o
			}
		}
	}
}

// BeliefEnd is when the holder of l stopped believing it held it: the
// earliest of its release call, the local deadline it can vouch for, the
// lease's Done as its worker saw it, its process's death, and — after a
// force-release with --now, which frees the permits at once — the
// force-release. A plain force-release keeps the permits taken until the
// old holder's deadline: its belief stands until it learns or the deadline
// passes.
func (l *Lease) BeliefEnd() int64 {
	end := min(l.Deadline, l.Done, l.Death)
	if l.ForceOp != nil && l.ForceOp.Now {
		end = min(end, l.Forced)
	}
	for _, o := range l.Ops {
		if o.Type == OpRelease {
			end = min(end, o.Call)
		}
	}
	return end
}
