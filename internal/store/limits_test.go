package store

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/testenv"
)

// Every field of every record kind at its limits, as requests may carry
// them (the bounds of the root package's validation), goes into the log
// and comes back after a restart.

// atLimits are requests whose every field is at a bound: the longest
// strings (multi-byte runes included), the largest and smallest numbers.
func atLimits() []sema.Request {
	long := strings.Repeat("é", sema.MaxNameLen/2) + "n" // 255 bytes
	return []sema.Request{{
		Name: long, ID: strings.Repeat("I", sema.MaxIDLen), Owner: strings.Repeat("ö", sema.MaxOwnerLen/2) + "o",
		Host: strings.Repeat("h", sema.MaxOwnerLen), PID: sema.MaxPID,
		Limit: sema.MaxLimit, Weight: sema.MaxLimit, TTL: sema.MaxTTL,
	}, {
		Name: "n", ID: "i", Limit: 1, Weight: 1, TTL: sema.MinTTL * 10,
	}}
}

// TestRecordsAtLimitsRoundTrip: each kind of record, with each field at
// its limits, decodes to what was encoded.
func TestRecordsAtLimitsRoundTrip(t *testing.T) {
	r := atLimits()[0]
	princ := strings.Repeat("p", maxPrincLen)
	for _, rec := range []record{
		{kind: kindGrant, name: r.Name, id: r.ID, owner: r.Owner, host: r.Host, principal: princ, pid: r.PID,
			weight: r.Weight, limit: r.Limit, token: math.MaxUint64, ttl: r.TTL, acquired: math.MaxInt64},
		{kind: kindGrant, name: "n", id: "i", weight: 1, limit: 1, token: 1, ttl: sema.MinTTL, acquired: math.MinInt64},
		{kind: kindEnd, name: r.Name, id: r.ID, reason: endGiveBack},
		{kind: kindTTL, name: r.Name, id: r.ID, ttl: sema.MaxTTL},
		{kind: kindTTL, name: "n", id: "i", ttl: sema.MinTTL},
		{kind: kindMeta, token: math.MaxUint64, count: math.MaxUint64},
		{kind: kindFast, name: r.Name, limit: sema.MaxLimit, ttl: sema.MaxTTL},
		{kind: kindFast, name: "n", limit: 1, ttl: sema.MinTTL},
		{kind: kindUnfast, name: r.Name},
		{kind: kindReserve, token: math.MaxUint64},
		{kind: kindRevoke, name: r.Name, id: r.ID},
	} {
		b := appendFrame(nil, &rec)
		got, n, err := readFrame(b)
		if err != nil || n != len(b) || got != rec {
			t.Errorf("kind %d: round trip = %+v, %v", rec.kind, got, err)
		}
	}
}

// TestLimitsSurviveRestart: grants, a raised TTL, handoffs (FAST,
// UNFAST, RESERVE), ends and the snapshot's header, all with fields at
// their limits, through the log and two restarts.
func TestLimitsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	ctx := context.Background()
	princ := Caller{Principal: strings.Repeat("p", maxPrincLen)}
	reqs := atLimits()
	want := map[string]sema.Grant{}
	for _, r := range reqs {
		ttl := r.TTL
		r.TTL = sema.MinTTL * 5
		if _, err := s.AcquireAs(ctx, r, princ, false); err != nil {
			t.Fatalf("acquire at limits: %v", err)
		}
		g, err := s.RenewAs(ctx, r.Name, r.ID, ttl, princ) // a TTL record
		if err != nil {
			t.Fatal(err)
		}
		want[r.Name] = g
	}
	// Handoffs on a name: FAST, RESERVE; the name idle again: UNFAST.
	if _, err := s.TryAcquire(ctx, req("hot", "h0", 1)); err != nil {
		t.Fatal(err)
	}
	g := handoff(t, s, "hot", "h0", "h1", sema.MaxTTL)
	if err := s.Release(ctx, "hot", g.ID); err != nil { // an END record
		t.Fatal(err)
	}
	for round := range 2 {
		s.Close()
		s = openT(t, dir)
		for _, r := range reqs {
			st, err := s.Describe(ctx, r.Name)
			if err != nil || len(st.Holders) != 1 {
				t.Fatalf("restart %d: %q: %+v %v", round, r.Name, st, err)
			}
			h, w := st.Holders[0], want[r.Name]
			if h.ID != r.ID || h.Owner != r.Owner || h.Host != r.Host || h.PID != r.PID || h.Weight != r.Weight ||
				h.Token != w.Token || st.Limit != r.Limit || !h.AcquiredAt.Equal(w.AcquiredAt) {
				t.Errorf("restart %d: holder %+v (limit %d), want %+v", round, h, st.Limit, r)
			}
			if left := time.Until(h.ExpiresAt); left < r.TTL-time.Minute {
				t.Errorf("restart %d: %q expires in %v, want its raised TTL %v", round, r.Name, left, r.TTL)
			}
			if _, err := s.RenewAs(ctx, r.Name, r.ID, r.TTL, princ); err != nil {
				t.Errorf("restart %d: renew by its principal: %v", round, err)
			}
		}
		if st, _ := s.Describe(ctx, "hot"); len(st.Holders) != 0 {
			t.Errorf("restart %d: hot is fenced or held after UNFAST: %+v", round, st)
		}
		if g2, err := s.TryAcquire(ctx, req("after", "a", 1)); err != nil || g2.Token <= g.Token {
			t.Errorf("restart %d: token %d after %d: %v", round, g2.Token, g.Token, err)
		}
	}
	s.Close()
}

// TestEdgeRefusesWhatTheLogCannotHold: a request with a field beyond its
// bound is refused before anything is journaled.
func TestEdgeRefusesWhatTheLogCannotHold(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	for _, r := range []sema.Request{
		{Name: "p", ID: "p1", Limit: 1, Weight: 1, TTL: time.Second, PID: sema.MaxPID + 1},
		{Name: strings.Repeat("n", sema.MaxNameLen+1), ID: "p1", Limit: 1, Weight: 1, TTL: time.Second},
		{Name: "p", ID: "p1", Limit: 1, Weight: 1, TTL: time.Second, Host: strings.Repeat("h", sema.MaxOwnerLen+1)},
	} {
		if _, err := s.TryAcquire(t.Context(), r); err == nil {
			t.Errorf("accepted %+v", r)
		}
	}
	if _, err := s.AcquireAs(t.Context(), req("p", "p2", 1), Caller{Principal: strings.Repeat("p", maxPrincLen+1)}, false); !errors.Is(err, sema.ErrInvalidArgument) {
		t.Errorf("a principal over its bound: %v", err)
	}
	if n := s.Stats().Records; n != 0 {
		t.Errorf("%d records journaled for refused requests", n)
	}
}

// TestOddRecordsHonoured: a log written by a server that accepted values
// refused today (a pid beyond MaxPID, a name with a bidi override) opens,
// with a warning, and its leases are honoured.
func TestOddRecordsHonoured(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	tok := fill(t, s, "o/", 1)
	s.Close()
	for i, r := range []record{
		{kind: kindGrant, name: "o/pid", id: "p1", weight: 1, limit: 1, token: tok + 100, ttl: time.Minute, pid: 1 << 31},
		{kind: kindGrant, name: "o/ad\u202emin", id: "p2", weight: 1, limit: 1, token: tok + 200, ttl: time.Minute},
	} {
		appendFile(t, lastSegment(t, dir), appendFrame(nil, &r))
		var logs bytes.Buffer
		s, err := Open(Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if !strings.Contains(logs.String(), "honouring records") {
			t.Errorf("record %d: no warning in %q", i, logs.String())
		}
		st, err := s.List(t.Context(), "o/")
		if err != nil || len(st) != i+2 {
			t.Fatalf("record %d: recovered %+v %v", i, st, err)
		}
		for _, n := range st {
			if n.Holders[0].PID != 0 && n.Name == "o/pid" {
				t.Errorf("pid out of range kept: %+v", n.Holders[0])
			}
		}
		if g, err := s.TryAcquire(t.Context(), req("o/next", "n", 1)); err != nil || g.Token <= tok+uint64(100*(i+1)) {
			t.Errorf("next token %+v %v", g, err)
		}
		s.Release(t.Context(), "o/next", "n")
		s.Close()
	}
}

// TestLogBelowReservationRefused: a log that lost the end holding its
// last token reservation (storage lost data) is refused, unless told to
// accept the loss; then tokens continue above the reservation.
func TestLogBelowReservationRefused(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	if _, err := s.TryAcquire(t.Context(), req("hot", "h0", 1)); err != nil {
		t.Fatal(err)
	}
	last := handoff(t, s, "hot", "h0", "h1", time.Minute) // FAST and RESERVE
	testenv.WaitFor(t, "the reservation mark written", func() bool { _, err := os.Stat(dir + "/" + reserveName); return err == nil })
	seg := lastSegment(t, dir)
	s.Close()
	// Storage loses every record of the segment.
	if err := os.Truncate(seg, int64(len(segHeader(0)))); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Config{Dir: dir, Logger: quiet})
	if !errors.Is(err, sema.ErrUnavailable) || !strings.Contains(err.Error(), "reservation") {
		t.Fatalf("Open of a log below its reservation: %v", err)
	}
	s, err = Open(Config{Dir: dir, Logger: quiet, AcceptDataLoss: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if g, err := s.TryAcquire(t.Context(), req("after", "a", 1)); err != nil || g.Token <= last.Token+reserveChunk/2 {
		t.Fatalf("token after accepting the loss: %+v %v (handed out before: %d)", g, err, last.Token)
	}
}
