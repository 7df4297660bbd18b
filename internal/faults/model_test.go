package faults

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// mop builds a model operation on a limit-L name invoked at call and
// returning at ret (in ms).
func mop(client int, call, ret int64, in mInput) porcupine.Operation {
	in.call, in.ret = call*1e6, ret*1e6
	in.drop *= 1e6
	in.expire *= 1e6
	in.after *= 1e6
	if in.limit == 0 {
		in.limit = 1
	}
	if in.op == nil && in.kind != mCrash && in.kind != mRestart {
		in.op = &Op{Client: client, Name: "x", ID: in.id, Token: in.token}
	}
	return porcupine.Operation{ClientId: client, Input: &in, Call: in.call, Return: in.ret}
}

func grant(id string, tok uint64, w, drop, expire int64) mInput {
	return mInput{kind: mGrant, id: id, token: tok, weight: w, drop: drop, expire: expire}
}

// TestModel runs the model on small histories: each legal one must pass
// and each illegal one must fail, so the model is neither wrong nor
// vacuous on the cases it is about.
func TestModel(t *testing.T) {
	const far = 1 << 40
	tests := []struct {
		name  string
		legal bool
		ops   []porcupine.Operation
	}{
		{"a grant after a release", true, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, far)),
			mop(0, 20, 30, mInput{kind: mReleaseOK, id: "a"}),
			mop(1, 40, 50, grant("b", 2, 1, 850, far)),
		}},
		{"two holders of a mutex", false, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, far)),
			mop(1, 40, 50, grant("b", 2, 1, 850, far)),
		}},
		{"a grant once the holder's deadline passed", true, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, far)),
			mop(1, 700, 850, grant("b", 2, 1, 1500, far)),
		}},
		{"a grant before the holder's deadline", false, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, far)),
			mop(1, 700, 790, grant("b", 2, 1, 1500, far)),
		}},
		{"a semaphore of 3 takes weights 1 and 2, not 2 and 2", false, []porcupine.Operation{
			mop(0, 0, 10, mInput{kind: mGrant, id: "a", token: 1, weight: 1, limit: 3, drop: 800, expire: far}),
			mop(1, 20, 30, mInput{kind: mGrant, id: "b", token: 2, weight: 2, limit: 3, drop: 800, expire: far}),
			mop(2, 40, 50, mInput{kind: mReleaseOK, id: "a", limit: 3}),
			mop(2, 60, 70, mInput{kind: mGrant, id: "c", token: 3, weight: 2, limit: 3, drop: 800, expire: far}),
		}},
		{"concurrent grants may take either order for tokens", true, []porcupine.Operation{
			mop(0, 0, 10, mInput{kind: mGrant, id: "a", token: 2, weight: 1, limit: 2, drop: 800, expire: far}),
			mop(1, 5, 15, mInput{kind: mGrant, id: "b", token: 1, weight: 1, limit: 2, drop: 800, expire: far}),
		}},
		{"a token that goes back", false, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 5, 1, 800, far)),
			mop(0, 20, 30, mInput{kind: mReleaseOK, id: "a"}),
			mop(1, 40, 50, grant("b", 3, 1, 850, far)),
		}},
		{"held while nothing is held", false, []porcupine.Operation{
			mop(0, 0, 10, mInput{kind: mHeld, weight: 1}),
		}},
		{"held while a waiter may be queued", true, []porcupine.Operation{
			mop(0, 0, 10, mInput{kind: mHeld, weight: 1, queued: true}),
		}},
		{"held by a lease an unknown acquire may have left", true, []porcupine.Operation{
			mop(1, 100, 110, mInput{kind: mHeld, weight: 1, ghosts: 1}),
			mop(1, 200, 210, grant("b", 2, 1, 1000, far)),
		}},
		{"held by a restart's fence", true, []porcupine.Operation{
			mop(1, 100, 110, mInput{kind: mHeld, weight: 1, fenced: true}),
		}},
		{"held by a lease after it surely expired", false, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, 2000)),
			mop(1, 2100, 2110, mInput{kind: mHeld, weight: 1}),
		}},
		{"a refresh extends the deadline", false, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, far)),
			mop(0, 300, 310, mInput{kind: mRefreshOK, id: "a", drop: 1100}),
			mop(1, 900, 1000, grant("b", 2, 1, 1800, far)),
		}},
		{"a refresh of a released lease", false, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, far)),
			mop(0, 20, 30, mInput{kind: mReleaseOK, id: "a"}),
			mop(0, 40, 50, mInput{kind: mRefreshOK, id: "a", drop: 850}),
		}},
		{"a refresh that finds a live lease lost", false, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, far)),
			mop(0, 300, 310, mInput{kind: mRefreshLost, id: "a"}),
		}},
		{"a refresh that finds an expired lease lost", true, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, far)),
			mop(0, 700, 810, mInput{kind: mRefreshLost, id: "a"}),
		}},
		{"a lease reported lost at its deadline is force-released before it expires", true, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, 1500)),
			mop(0, 500, 810, mInput{kind: mRefreshLost, id: "a"}),
			mop(2, 900, 910, mInput{kind: mForce, freed: []string{"a"}}),
		}},
		{"a lease reported lost holds no permits past its expiry", true, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, 1500)),
			mop(0, 500, 810, mInput{kind: mRefreshLost, id: "a"}),
			mop(1, 1600, 1610, grant("b", 2, 1, 2400, far)),
		}},
		{"a release twice", false, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, far)),
			mop(0, 20, 30, mInput{kind: mReleaseOK, id: "a"}),
			mop(0, 40, 50, mInput{kind: mReleaseOK, id: "a"}),
		}},
		{"a force-release frees at once", true, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, far)),
			mop(2, 100, 110, mInput{kind: mForce, freed: []string{"a"}}),
			mop(1, 120, 130, grant("b", 2, 1, 900, far)),
			mop(0, 300, 310, mInput{kind: mRefreshLost, id: "a"}),
		}},
		{"a refresh succeeds after a force-release", false, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, far)),
			mop(2, 100, 110, mInput{kind: mForce, freed: []string{"a"}}),
			mop(0, 300, 310, mInput{kind: mRefreshOK, id: "a", drop: 1100}),
		}},
		{"a strict force-release keeps the permits until the deadline", false, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, far)),
			mop(2, 100, 110, mInput{kind: mForce, freed: []string{"a"}, strict: true}),
			mop(1, 120, 130, grant("b", 2, 1, 900, far)),
		}},
		{"after a strict force-release, a grant once the deadline passed", true, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, far)),
			mop(2, 100, 110, mInput{kind: mForce, freed: []string{"a"}, strict: true}),
			mop(1, 700, 810, grant("b", 2, 1, 1600, far)),
		}},
		{"the old holder's release frees a force-released lease", true, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, far)),
			mop(2, 100, 110, mInput{kind: mForce, freed: []string{"a"}, strict: true}),
			mop(0, 200, 210, mInput{kind: mReleaseGone, id: "a"}),
			mop(1, 300, 310, grant("b", 2, 1, 1100, far)),
		}},
		{"a plain force-release that finds no holder keeps a force-released lease", false, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, far)),
			mop(2, 100, 110, mInput{kind: mForce, freed: []string{"a"}, strict: true}),
			mop(2, 200, 210, mInput{kind: mForce, strict: true}),
			mop(1, 300, 310, grant("b", 2, 1, 1100, far)),
		}},
		{"a force-release with --now frees a force-released lease", true, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, far)),
			mop(2, 100, 110, mInput{kind: mForce, freed: []string{"a"}, strict: true}),
			mop(2, 200, 210, mInput{kind: mForce}),
			mop(1, 300, 310, grant("b", 2, 1, 1100, far)),
		}},
		{"a crash brings back a lazily released lease", true, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, far)),
			mop(0, 100, 110, mInput{kind: mReleaseOK, id: "a", durable: far}),
			mop(3, 120, 400, mInput{kind: mCrash, after: 1600}),
			mop(2, 500, 510, mInput{kind: mForce, freed: []string{"a"}}),
		}},
		{"a crash brings back no durably released lease", false, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, far)),
			mop(0, 100, 110, mInput{kind: mReleaseOK, id: "a"}),
			mop(3, 120, 400, mInput{kind: mCrash, after: 1600}),
			mop(2, 500, 510, mInput{kind: mForce, freed: []string{"a"}}),
		}},
		{"a force-release that misses a live lease", false, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, far)),
			mop(2, 100, 110, mInput{kind: mForce}),
		}},
		{"a crash brings back a force-released lease", true, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, far)),
			mop(2, 100, 110, mInput{kind: mForce, freed: []string{"a"}}),
			mop(3, 120, 400, mInput{kind: mCrash, after: 1600}),
			mop(0, 500, 510, mInput{kind: mRefreshOK, id: "a", drop: 1300}),
		}},
		{"a crash may lose a lease", true, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, far)),
			mop(3, 120, 400, mInput{kind: mCrash, after: 1600}),
			mop(0, 500, 510, mInput{kind: mRefreshLost, id: "a"}),
		}},
		{"a restart keeps leases", false, []porcupine.Operation{
			mop(0, 0, 10, grant("a", 1, 1, 800, far)),
			mop(3, 120, 400, mInput{kind: mRestart, after: 1600}),
			mop(0, 500, 510, mInput{kind: mRefreshLost, id: "a"}),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := porcupine.CheckOperationsTimeout(model, tc.ops, 10*time.Second)
			if want := map[bool]porcupine.CheckResult{true: porcupine.Ok, false: porcupine.Illegal}[tc.legal]; res != want {
				t.Fatalf("%s, want %s", res, want)
			}
			if !tc.legal {
				return
			}
			// Every prefix of a legal history, cut as the shrinker cuts it,
			// is legal too.
			for _, op := range tc.ops {
				for _, cut := range []int64{op.Call, op.Return} {
					if !porcupine.CheckOperations(model, unknownPrefix(tc.ops, cut)) {
						t.Fatalf("the prefix cut at %d ms is not legal", cut/1e6)
					}
				}
			}
		})
	}
}
