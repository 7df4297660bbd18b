package faults

import (
	"strings"
	"testing"
	"time"
)

// script builds a worker's journal: times are in milliseconds.
type script struct {
	recs []Rec
	op   int64
}

const ttlMs = 1000

func ms(t int64) int64 { return t * 1e6 }

func (s *script) acquire(call, ret int64, name string, limit, w int64, id string, tok uint64) *script {
	s.op++
	s.recs = append(s.recs,
		Rec{K: "inv", Op: s.op, T: ms(call), Type: OpTry, Name: name, Limit: limit, Weight: w, TTL: ms(ttlMs), Margin: ms(ttlMs / 5)},
		Rec{K: "ret", Op: s.op, T: ms(ret), Res: ResOK, ID: id, Token: tok, Deadline: ms(call + ttlMs - ttlMs/5)})
	return s
}

func (s *script) release(call, ret int64, name, id string, res Result) *script {
	s.op++
	s.recs = append(s.recs,
		Rec{K: "inv", Op: s.op, T: ms(call), Type: OpRelease, Name: name, ID: id},
		Rec{K: "ret", Op: s.op, T: ms(ret), Res: res})
	return s
}

// history builds a history from worker scripts, resource writes (by name)
// and the harness's operations.
func history(t *testing.T, scripts []*script, res map[string][]ResWrite, harness ...*Op) *History {
	t.Helper()
	js := map[int][]Rec{}
	for i, s := range scripts {
		js[i+1] = s.recs
	}
	for _, o := range harness {
		o.Call, o.Ret = ms(o.Call), ms(o.Ret)
	}
	h, err := Build(0, ms(100_000), js, harness, nil, res, map[int]int64{})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func wr(t int64, tok uint64, id string, ok bool) ResWrite {
	return ResWrite{T: ms(t), Token: tok, ID: id, OK: ok}
}

func expect(t *testing.T, vs []Violation, want string) {
	t.Helper()
	if want == "" {
		for _, v := range vs {
			t.Errorf("unexpected %s violation: %s", v.Check, v.Msg)
		}
		return
	}
	if len(vs) == 0 || !strings.Contains(vs[0].Msg, want) {
		t.Fatalf("want a violation saying %q, got %v", want, vs)
	}
}

func TestCheckOverlapAndTokens(t *testing.T) {
	var o Options
	released := []*script{
		new(script).acquire(0, 10, "m", 1, 1, "a", 1).release(300, 310, "m", "a", ResOK),
		new(script).acquire(5, 320, "m", 1, 1, "b", 2),
	}
	expect(t, CheckOverlap(history(t, released, nil), o), "")
	expect(t, CheckTokens(history(t, released, nil), o), "")

	overlap := []*script{
		new(script).acquire(0, 10, "m", 1, 1, "a", 1),
		new(script).acquire(100, 110, "m", 1, 1, "b", 2),
	}
	expect(t, CheckOverlap(history(t, overlap, nil), o), "believe they hold 2 permits of 1")

	expired := []*script{
		new(script).acquire(0, 10, "m", 1, 1, "a", 1),
		new(script).acquire(700, 810, "m", 1, 1, "b", 2), // a's deadline: 800
	}
	expect(t, CheckOverlap(history(t, expired, nil), o), "")

	back := []*script{
		new(script).acquire(0, 10, "m", 1, 1, "a", 5).release(20, 30, "m", "a", ResOK),
		new(script).acquire(40, 50, "m", 1, 1, "b", 4),
	}
	expect(t, CheckTokens(history(t, back, nil), o), "token went back")

	forced := func(now bool) *History {
		return history(t, overlap, nil, &Op{Type: OpForce, Name: "m", Limit: 1, Call: 50, Ret: 60, Res: ResOK, Now: now,
			Seen: []Seen{{ID: "a", Token: 1, Weight: 1}}})
	}
	expect(t, CheckOverlap(forced(true), o), "")
	expect(t, CheckOverlap(forced(false), o), "believe they hold 2 permits of 1")
}

// TestExitEndsLeases: a worker that closes its client to exit ends the
// leases it still holds, in the history as at a death.
func TestExitEndsLeases(t *testing.T) {
	abandoned := func(exit bool) []*script {
		a := new(script).acquire(0, 10, "m", 1, 1, "a", 1)
		if exit {
			a.recs = append(a.recs, Rec{K: "exit", T: ms(300)})
		}
		return []*script{a, new(script).acquire(305, 310, "m", 1, 1, "b", 2)}
	}
	o := Options{FreesOnDeath: true, Slack: ms(1000)}
	expect(t, CheckOverlap(history(t, abandoned(false), nil), o), "believe they hold 2 permits of 1")
	expect(t, CheckOverlap(history(t, abandoned(true), nil), o), "")
	expect(t, CheckLinearizable(history(t, abandoned(false), nil), o, t.TempDir(), time.Minute), "not linearizable")
	expect(t, CheckLinearizable(history(t, abandoned(true), nil), o, t.TempDir(), time.Minute), "")
}

func TestCheckFencing(t *testing.T) {
	o := Options{}
	scripts := []*script{
		new(script).acquire(0, 10, "m", 1, 1, "a", 1).release(300, 310, "m", "a", ResOK),
		new(script).acquire(5, 320, "m", 1, 1, "b", 2),
	}
	good := map[string][]ResWrite{"m": {wr(20, 1, "a", true), wr(330, 2, "b", true), wr(900, 1, "a", false)}}
	vs, st := CheckFencing(history(t, scripts, good), o)
	expect(t, vs, "")
	if st.Writes != 3 || st.Rejected != 1 || st.Stale != 1 || st.StaleRejected != 1 {
		t.Fatalf("stats %+v", st)
	}
	// b's token went back: its own writes are refused.
	back := []*script{
		new(script).acquire(0, 10, "m", 1, 1, "a", 5).release(300, 310, "m", "a", ResOK),
		new(script).acquire(5, 320, "m", 1, 1, "b", 4),
	}
	valid := map[string][]ResWrite{"m": {wr(20, 5, "a", true), wr(330, 4, "b", false)}}
	vs, _ = CheckFencing(history(t, back, valid), o)
	expect(t, vs, "believed its lease valid was rejected")
	// b asked after a was granted, yet got a lower token: a's late write
	// is accepted after b's.
	later := []*script{
		new(script).acquire(0, 10, "m", 1, 1, "a", 3).release(300, 310, "m", "a", ResOK),
		new(script).acquire(15, 320, "m", 1, 1, "b", 2),
	}
	stale := map[string][]ResWrite{"m": {wr(330, 2, "b", true), wr(900, 3, "a", true)}}
	vs, _ = CheckFencing(history(t, later, stale), o)
	expect(t, vs, "stale write")
}

func TestCheckDescribe(t *testing.T) {
	o := Options{}
	scripts := []*script{
		new(script).acquire(0, 10, "s", 2, 1, "a", 1).release(300, 310, "s", "a", ResOK),
		new(script).acquire(5, 20, "s", 2, 1, "b", 2),
	}
	look := func(at int64, seen ...Seen) *Op {
		return &Op{Type: OpDescribe, Name: "s", Limit: 2, Call: at, Ret: at + 1, Res: ResOK, Seen: seen}
	}
	a, b := Seen{ID: "a", Token: 1, Weight: 1}, Seen{ID: "b", Token: 2, Weight: 1}
	expect(t, CheckDescribe(history(t, scripts, nil, look(100, a, b), look(400, b)), o), "")
	expect(t, CheckDescribe(history(t, scripts, nil, look(400, a, b)), o), "shows a lease that had ended")
	c := Seen{ID: "c", Token: 3, Weight: 1}
	expect(t, CheckDescribe(history(t, scripts, nil, look(100, a, b, c)), o), "shows 3 permits held of 2")
}

func (s *script) try(call, ret int64, name string, limit, w int64, res Result) *script {
	s.op++
	s.recs = append(s.recs,
		Rec{K: "inv", Op: s.op, T: ms(call), Type: OpTry, Name: name, Limit: limit, Weight: w, TTL: ms(ttlMs), Margin: ms(ttlMs / 5)},
		Rec{K: "ret", Op: s.op, T: ms(ret), Res: res})
	return s
}

// TestCheckLinearizable checks a refusal with nothing to explain it, then
// the same refusal explained by an acquire of unknown outcome before it,
// which may have left a lease.
func TestCheckLinearizable(t *testing.T) {
	o := Options{Slack: ms(1000)}
	alone := []*script{new(script).try(100, 110, "m", 1, 1, ResHeld)}
	vs := CheckLinearizable(history(t, alone, nil), o, t.TempDir(), time.Minute)
	expect(t, vs, "not linearizable")
	explained := []*script{
		new(script).try(0, 50, "m", 1, 1, ResUnknown),
		new(script).try(100, 110, "m", 1, 1, ResHeld),
	}
	expect(t, CheckLinearizable(history(t, explained, nil), o, t.TempDir(), time.Minute), "")
	// … but not once that lease surely expired: slack, TTL, slack after.
	late := []*script{
		new(script).try(0, 50, "m", 1, 1, ResUnknown),
		new(script).try(3100, 3110, "m", 1, 1, ResHeld),
	}
	expect(t, CheckLinearizable(history(t, late, nil), o, t.TempDir(), time.Minute), "not linearizable")
}
