package server

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/mem"
	"github.com/sema-dev/sema/internal/testenv"
	"github.com/sema-dev/sema/internal/wire"
)

// engines runs f over the embedded store and over another backend (the
// two engines of the server).
func engines(t *testing.T, tokens []Token, f func(t *testing.T, ts *tserver)) {
	t.Run("store", func(t *testing.T) { f(t, newTS(t, tokens, nil)) })
	t.Run("mem", func(t *testing.T) { f(t, newTS(t, tokens, mem.New())) })
}

// metric returns the line of the metrics page that starts with prefix, or "".
func (ts *tserver) metric(prefix string) string {
	ts.t.Helper()
	for _, line := range strings.Split(ts.do("GET", wire.PathMetrics, "", nil).raw, "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}

// TestRenewUnknownIsNotHeld: renewing a lease ID the server never granted
// is not_held, not an expiry, and is not counted as a lease loss; a lease
// that did expire is still lease_lost, reason expired, and counted.
func TestRenewUnknownIsNotHeld(t *testing.T) {
	engines(t, testTokens, func(t *testing.T, ts *tserver) {
		ts.mustAcquire(aliceTok, wire.AcquireRequest{Name: "r"})
		r := ts.do("POST", wire.PathRenew, aliceTok, wire.RenewRequest{Name: "r", ID: "never-granted"})
		wantErr(t, r, 404, wire.CodeNotHeld)
		if r.env.Error != nil && strings.Contains(r.env.Error.Message, "expired") {
			t.Errorf("the answer speaks of an expiry: %s", r.raw)
		}
		if m := ts.metric("sema_lease_losses_total"); m != "" {
			t.Errorf("an unknown ID counted as a lease loss: %q", m)
		}

		l := ts.mustAcquire(aliceTok, wire.AcquireRequest{Name: "short", TTLMillis: sema.MinTTL.Milliseconds()})
		testenv.WaitFor(t, "the lease to expire", func() bool { return len(ts.describe(adminTok, "short").Holders) == 0 })
		r = ts.do("POST", wire.PathRenew, aliceTok, wire.RenewRequest{Name: "short", ID: l.ID})
		wantErr(t, r, 410, wire.CodeLeaseLost)
		if r.env.Error != nil && r.env.Error.Reason != wire.ReasonExpired {
			t.Errorf("renew of an expired lease: reason %q", r.env.Error.Reason)
		}
		if m := ts.metric(`sema_lease_losses_total{reason="expired"}`); !strings.HasSuffix(m, " 1") {
			t.Errorf("the expiry is not counted once: %q", m)
		}
	})
}

// TestReleaseTwiceSucceeds: a second release of the same lease answers
// success, as the Go client's Release does; a release of an ID never
// granted is still not_held.
func TestReleaseTwiceSucceeds(t *testing.T) {
	engines(t, testTokens, func(t *testing.T, ts *tserver) {
		l := ts.mustAcquire(aliceTok, wire.AcquireRequest{Name: "twice"})
		for i, want := range []string{"{}", `{"already_released":true}`, `{"already_released":true}`} {
			r := ts.do("POST", wire.PathRelease, aliceTok, wire.ReleaseRequest{Name: "twice", ID: l.ID})
			if r.status != 200 || strings.TrimSpace(r.raw) != want {
				t.Errorf("release #%d: %d %s, want 200 %s", i+1, r.status, r.raw, want)
			}
		}
		// Not for another token: to bob the lease stays unknown.
		wantErr(t, ts.do("POST", wire.PathRelease, bobTok, wire.ReleaseRequest{Name: "twice", ID: l.ID}), 404, wire.CodeNotHeld)
		wantErr(t, ts.do("POST", wire.PathRelease, aliceTok, wire.ReleaseRequest{Name: "twice", ID: "never-granted"}), 404, wire.CodeNotHeld)
		if st := ts.describe(adminTok, "twice"); len(st.Holders) != 0 {
			t.Errorf("after the releases: %s", mustJSON(st))
		}
	})
}

// TestOwnerDefaultsToCaller: a lease acquired without an owner shows who
// took it: the token's principal, or without tokens the client's address.
func TestOwnerDefaultsToCaller(t *testing.T) {
	engines(t, testTokens, func(t *testing.T, ts *tserver) {
		ts.mustAcquire(aliceTok, wire.AcquireRequest{Name: "o", Limit: 2})
		ts.mustAcquire(bobTok, wire.AcquireRequest{Name: "o", Limit: 2, Owner: "bob's job"})
		owners := map[string]bool{}
		for _, h := range ts.describe(adminTok, "o").Holders {
			owners[h.Owner] = true
		}
		sum := sha256.Sum256([]byte(aliceTok))
		alice := hex.EncodeToString(sum[:8]) // the principal: a fingerprint of the token
		if !owners["token "+alice] || !owners["bob's job"] || alice == "" {
			t.Errorf("owners %v, want %q and %q", owners, "token "+alice, "bob's job")
		}
	})
	engines(t, nil, func(t *testing.T, ts *tserver) {
		l := ts.mustAcquire("", wire.AcquireRequest{Name: "o"})
		if l.Owner != "address 127.0.0.1" {
			t.Errorf("owner %q, want the client's address", l.Owner)
		}
		if st := ts.describe("", "o"); len(st.Holders) != 1 || st.Holders[0].Owner != l.Owner {
			t.Errorf("describe: %s", mustJSON(st))
		}
	})
}

// TestGiveBackOvertakingAcquire: a client that gave up a wait releases its
// lease ID; over HTTP/1.1 that release can reach the server before the
// acquire it gives up. The acquire is then refused for good (invalid
// argument: the ID is spent; a client would poll again after "not
// acquired"), so no grant is left to nobody; an ID released after its
// grant may be acquired again.
func TestGiveBackOvertakingAcquire(t *testing.T) {
	engines(t, testTokens, func(t *testing.T, ts *tserver) {
		wantErr(t, ts.do("POST", wire.PathRelease, aliceTok, wire.ReleaseRequest{Name: "g", ID: "late"}), 404, wire.CodeNotHeld)
		wantErr(t, ts.acquire(aliceTok, wire.AcquireRequest{Name: "g", ID: "late"}), 400, wire.CodeInvalidArgument)
		if st := ts.describe(adminTok, "g"); len(st.Holders) != 0 {
			t.Errorf("a given-up acquire was granted: %s", mustJSON(st))
		}
		// Another client's give-back does not refuse alice's acquire.
		wantErr(t, ts.do("POST", wire.PathRelease, bobTok, wire.ReleaseRequest{Name: "g", ID: "mine"}), 404, wire.CodeNotHeld)
		l := ts.mustAcquire(aliceTok, wire.AcquireRequest{Name: "g", ID: "mine"})
		if r := ts.do("POST", wire.PathRelease, aliceTok, wire.ReleaseRequest{Name: "g", ID: l.ID}); r.status != 200 {
			t.Fatalf("release: %d %s", r.status, r.raw)
		}
		ts.mustAcquire(aliceTok, wire.AcquireRequest{Name: "g", ID: "mine"})
	})
}
