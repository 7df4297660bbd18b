package faults

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Violation is a broken guarantee, with the shortest evidence found.
type Violation struct {
	Check string // tokens, overlap, fencing, describe, linearizability
	Name  string // the semaphore
	At    int64  // when it happened (Now() clock)
	Msg   string
}

// Options says how to read a history: what the backend declares.
type Options struct {
	// FreesOnDeath: the permits of a killed holder are free at once
	// (file://: the kernel drops its locks).
	FreesOnDeath bool
	// LazyRelease: a release that hands nothing over commits without
	// waiting for the disk (sema serve, PostgreSQL), so a crash of the
	// server may undo it: the lease is back until it expires. Nobody can
	// be granted its permits meanwhile (a later grant's durable write
	// carries the release before it).
	LazyRelease bool
	// Slack bounds how late the effect of an operation whose outcome is
	// unknown (an error, a reset, a process killed mid-call) may still
	// happen after the call returned or the process died: the longest
	// connection pause the harness injects plus a second.
	Slack int64
}

// timeline formats a lease's life relative to start, for messages.
func (l *Lease) timeline(h *History, o Options) string {
	rel := func(t int64) string {
		if t == never {
			return "never"
		}
		return "+" + dur(t-h.Start)
	}
	s := fmt.Sprintf("lease %s (c%d, token %d, weight %d/%d): acquire called %s, returned %s; deadline %s; believed until %s",
		short(l.ID), l.Client, l.Token, l.Weight, l.Limit, rel(l.Grant.Call), rel(l.Grant.Ret), rel(l.Deadline), rel(l.BeliefEnd()))
	if l.Done != never {
		s += "; Done seen " + rel(l.Done)
	}
	if l.Death != never {
		s += "; process killed " + rel(l.Death)
	}
	if l.Forced != never {
		s += "; force-released " + rel(l.Forced)
	}
	for _, op := range l.Ops {
		s += fmt.Sprintf("; %s %s→%s %s", op.Type, rel(op.Call), rel(op.Ret), op.Res)
	}
	return s
}

// CheckTokens checks that tokens are unique per name and strictly
// increasing in the real-time order of grants: a grant that returned
// before another was asked for has the smaller token.
func CheckTokens(h *History, o Options) []Violation {
	var out []Violation
	for name, ls := range h.byName() {
		seen := map[uint64]*Lease{}
		for _, l := range ls {
			if p := seen[l.Token]; p != nil {
				out = append(out, Violation{"tokens", name, l.Grant.Ret, fmt.Sprintf("%q: token %d granted twice:\n  %s\n  %s",
					name, l.Token, p.timeline(h, o), l.timeline(h, o))})
			}
			seen[l.Token] = l
		}
		byRet := slices.Clone(ls)
		slices.SortFunc(byRet, func(a, b *Lease) int { return cmpInt(a.Grant.Ret, b.Grant.Ret) })
		var top *Lease // the highest token among grants returned so far
		i := 0
		for _, l := range ls { // by call
			for ; i < len(byRet) && byRet[i].Grant.Ret < l.Grant.Call; i++ {
				if top == nil || byRet[i].Token > top.Token {
					top = byRet[i]
				}
			}
			if top != nil && top.Token >= l.Token {
				out = append(out, Violation{"tokens", name, l.Grant.Ret, fmt.Sprintf(
					"%q: token went back: a grant returned before another was asked for has the higher token:\n  %s\n  %s",
					name, top.timeline(h, o), l.timeline(h, o))})
			}
		}
	}
	return out
}

// byName returns the leases of each name by grant call.
func (h *History) byName() map[string][]*Lease {
	m := map[string][]*Lease{}
	for _, l := range h.Leases {
		m[l.Name] = append(m[l.Name], l)
	}
	for _, ls := range m {
		slices.SortFunc(ls, func(a, b *Lease) int { return cmpInt(a.Grant.Call, b.Grant.Call) })
	}
	return m
}

// CheckOverlap checks that at no instant the weights of the leases whose
// holders believe them valid — from the grant's return to BeliefEnd —
// exceed the limit.
func CheckOverlap(h *History, o Options) []Violation {
	var out []Violation
	for name, ls := range h.byName() {
		type ev struct {
			t     int64
			delta int64
			l     *Lease
		}
		var evs []ev
		for _, l := range ls {
			if end := l.BeliefEnd(); end > l.Grant.Ret {
				evs = append(evs, ev{l.Grant.Ret, l.Weight, l}, ev{end, -l.Weight, l})
			}
		}
		// Ends before starts at the same instant: intervals are half-open.
		slices.SortFunc(evs, func(a, b ev) int {
			if c := cmpInt(a.t, b.t); c != 0 {
				return c
			}
			return cmpInt(a.delta, b.delta)
		})
		live := map[*Lease]bool{}
		var sum int64
		for _, e := range evs {
			sum += e.delta
			if e.delta < 0 {
				delete(live, e.l)
				continue
			}
			live[e.l] = true
			if limit := h.Limits[name]; sum > limit {
				var b strings.Builder
				fmt.Fprintf(&b, "%q: at +%s the holders believe they hold %d permits of %d:", name, dur(e.t-h.Start), sum, limit)
				for l := range live {
					b.WriteString("\n  " + l.timeline(h, o))
				}
				out = append(out, Violation{"overlap", name, e.t, b.String()})
				break // one per name: the first
			}
		}
	}
	return out
}

// FencingStats counts what the fenced resource saw.
type FencingStats struct {
	Writes, Rejected         int
	StallWrites, StallReject int // written right after a stall of the writer
	Stale, StaleRejected     int // written after the writer's belief ended
}

// CheckFencing checks the fenced resource of each mutex: the tokens it
// accepted never decrease; a write made while its lease was believed valid
// is accepted (else a token went back or two holders overlapped); and a
// write by a holder after another lease, granted after its own, wrote
// first is rejected.
func CheckFencing(h *History, o Options) ([]Violation, FencingStats) {
	var out []Violation
	var st FencingStats
	for name, us := range h.Uses {
		mutex := h.Limits[name] == 1
		var top *Use // highest token accepted so far
		writers := map[string]bool{}
		for _, u := range us {
			l := h.Leases[u.ID]
			st.Writes++
			if !u.OK {
				st.Rejected++
			}
			if u.Stall {
				st.StallWrites++
				if !u.OK {
					st.StallReject++
				}
			}
			end := l.BeliefEnd()
			if u.T > end {
				st.Stale++
				if !u.OK {
					st.StaleRejected++
				}
			}
			if !mutex {
				continue
			}
			switch {
			case u.OK && top != nil && u.Token < top.Token:
				out = append(out, Violation{"fencing", name, u.T, fmt.Sprintf("%q: the resource accepted token %d after token %d:\n  %s\n  %s",
					name, u.Token, top.Token, h.Leases[top.ID].timeline(h, o), l.timeline(h, o))})
			case !u.OK && u.T <= end && top != nil:
				out = append(out, Violation{"fencing", name, u.T, fmt.Sprintf(
					"%q: a write at +%s by a holder that believed its lease valid was rejected (token %d; the resource had accepted %d):\n  %s\n  %s",
					name, dur(u.T-h.Start), u.Token, top.Token, l.timeline(h, o), h.Leases[top.ID].timeline(h, o))})
			case u.OK:
				for id := range writers {
					b := h.Leases[id]
					if b.ID != l.ID && b.Grant.Call > l.Grant.Ret {
						out = append(out, Violation{"fencing", name, u.T, fmt.Sprintf(
							"%q: a stale write at +%s was accepted although a lease granted later had written first:\n  %s\n  %s",
							name, dur(u.T-h.Start), l.timeline(h, o), b.timeline(h, o))})
						break
					}
				}
			}
			if u.OK {
				writers[u.ID] = true
				if top == nil || u.Token > top.Token {
					top = u
				}
			}
		}
	}
	return out, st
}

// CheckDescribe checks what Describe showed: the holders' weights never
// exceed the limit, and a lease known to have ended (released, reported
// lost, force-released) never shows again. Exceptions: a force-released
// lease whose permits stay taken until its deadline shows, marked so; and
// after a server crash, its store may bring back leases whose end it had
// not yet written to disk.
func CheckDescribe(h *History, o Options) []Violation {
	var out []Violation
	crashWindow := func(t, ttl int64) bool {
		for _, f := range h.Faults {
			if f.Kind == FaultCrash && t >= f.T && t <= f.End+ttl+o.Slack {
				return true
			}
		}
		return false
	}
	for _, op := range h.Ops {
		if op.Type != OpDescribe || op.Res != ResOK {
			continue
		}
		var sum int64
		var shown []string
		for _, s := range op.Seen {
			if s.Waiter || s.Token == 0 { // a waiter, or a recovery fence
				continue
			}
			sum += s.Weight
			l := h.Leases[s.ID]
			shown = append(shown, fmt.Sprintf("%s (token %d, weight %d)", short(s.ID), s.Token, s.Weight))
			if l == nil {
				continue
			}
			if ended := l.endedBy(); ended != nil && ended.Ret < op.Call && !crashWindow(op.Call, l.TTL) &&
				!(s.Forced && ended == l.ForceOp && !ended.Now) {
				out = append(out, Violation{"describe", op.Name, op.Call, fmt.Sprintf(
					"%q: Describe at +%s shows a lease that had ended (%s → %s at +%s):\n  %s",
					op.Name, dur(op.Call-h.Start), ended.Type, ended.Res, dur(ended.Ret-h.Start), l.timeline(h, o))})
			}
		}
		if limit := h.Limits[op.Name]; limit > 0 && sum > limit {
			out = append(out, Violation{"describe", op.Name, op.Call, fmt.Sprintf("%q: Describe at +%s shows %d permits held of %d: %s",
				op.Name, dur(op.Call-h.Start), sum, limit, strings.Join(shown, ", "))})
		}
	}
	return out
}

// endedBy returns the first operation that proves the lease over on the
// backend: a confirmed release, or a force-release that reported it. (A
// refresh that reports the lease lost proves nothing: the lease may have
// ended locally, at its deadline, while the backend still holds it.)
func (l *Lease) endedBy() *Op {
	first := l.ForceOp
	for _, o := range l.Ops {
		if o.Type == OpRelease && o.Res == ResOK && (first == nil || o.Ret < first.Ret) {
			first = o
		}
	}
	return first
}

// CheckAll runs every check on h: tokens, overlap, fencing, Describe and
// linearizability (porcupine's visualization of a failure goes to dir).
// It returns the violations by time, at most a few per check and name.
func CheckAll(h *History, o Options, dir string, timeout time.Duration) ([]Violation, FencingStats) {
	var vs []Violation
	vs = append(vs, CheckTokens(h, o)...)
	vs = append(vs, CheckOverlap(h, o)...)
	fv, fs := CheckFencing(h, o)
	vs = append(vs, fv...)
	vs = append(vs, CheckDescribe(h, o)...)
	vs = append(vs, CheckLinearizable(h, o, dir, timeout)...)
	slices.SortStableFunc(vs, func(a, b Violation) int { return cmpInt(a.At, b.At) })
	const perKind = 3
	seen := map[string]int{}
	var out []Violation
	for _, v := range vs {
		k := v.Check + " " + v.Name
		if seen[k]++; seen[k] <= perKind {
			out = append(out, v)
		}
	}
	for k, n := range seen {
		if n > perKind {
			out = append(out, Violation{Check: strings.Fields(k)[0], At: h.End,
				Msg: fmt.Sprintf("…and %d more %s violations on %q", n-perKind, strings.Fields(k)[0], strings.TrimPrefix(k, strings.Fields(k)[0]+" "))})
		}
	}
	return out, fs
}
