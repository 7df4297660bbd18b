package faults

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
)

// The sequential model of one semaphore name that porcupine checks a
// history against. See the package documentation ("The model") for why it
// is sound (a correct backend always passes) and not vacuous.

// mKind is what an operation does in the model.
type mKind int

const (
	mGrant       mKind = iota // an acquire that returned a lease
	mHeld                     // a TryAcquire that found the permits taken
	mRefreshOK                // the backend confirmed a renewal
	mRefreshLost              // a renewal that found the lease gone
	mReleaseOK                // the backend confirmed a release
	mReleaseGone              // a release that found the lease gone
	mReleaseMay               // a release whose outcome is unknown
	mForce                    // an admin's force-release of every holder
	mForceMay                 // a force-release whose outcome is unknown
	mCrash                    // the server was killed and restarted
	mRestart                  // the server was stopped (SIGTERM) and restarted
)

// mInput is an operation as the model sees it.
type mInput struct {
	kind   mKind
	op     *Op       // for descriptions; nil for crash and restart
	fault  FaultKind // crash, restart: the fault, for descriptions
	id     string
	weight int64
	limit  int64
	token  uint64
	call   int64
	ret    int64 // the real return (porcupine's Return of an operation whose outcome is unknown is later)
	drop   int64 // grant, refresh ok: the lease may be gone from the backend once an operation returns after this
	expire int64 // grant: the lease is surely gone for operations invoked after this
	// held: what else may have kept the permits taken while it ran: a
	// queued waiter (TryAcquire fails while anyone waits: FIFO), a restart
	// (its recovery fence, leases whose end was not on disk), or leases
	// that acquires whose outcome is unknown may have left (their weight)
	queued, fenced bool
	ghosts         int64
	freed          []string // force: the leases it reported, those the history knows
	strict         bool     // force: without --now, the permits stay taken until the old holder's deadline
	// release ok: a crash may undo it until durable (Options.LazyRelease);
	// 0 if it is durable at once
	durable int64
	after   int64 // crash, restart: a lease or fence from before may last until this
	cut     bool  // a shrunk history made its outcome unknown
}

// mLease is a lease the backend may hold.
type mLease struct {
	id     string
	w      int64
	drop   int64 // may be gone for operations that return after this
	expire int64 // surely gone for operations invoked after this
	zombie bool  // force-released while its permits stay taken: not renewable
	// in revoked, a lease released lazily: a crash invoked after this no
	// longer brings it back (0: until it expires)
	durable int64
}

// mState is the backend's state of one name, as far as the model knows.
type mState struct {
	leases  []mLease // sorted by mLease.less
	maxTok  uint64   // the highest token granted
	revoked []mLease // ended leases that a crash may bring back: force-released, or released lazily
}

func (a mLease) less(b mLease) int {
	if c := strings.Compare(a.id, b.id); c != 0 {
		return c
	}
	if c := cmpInt(a.w, b.w); c != 0 {
		return c
	}
	if c := cmpInt(a.drop, b.drop); c != 0 {
		return c
	}
	return cmpInt(a.expire, b.expire)
}

func (s *mState) clone() *mState {
	c := *s
	c.leases = slices.Clone(s.leases)
	c.revoked = slices.Clone(s.revoked)
	return &c
}

func (s *mState) used() int64 {
	var n int64
	for _, l := range s.leases {
		n += l.w
	}
	return n
}

func (s *mState) find(id string) int {
	for i, l := range s.leases {
		if l.id == id && id != "" {
			return i
		}
	}
	return -1
}

func (s *mState) add(l mLease) {
	i, _ := slices.BinarySearchFunc(s.leases, l, mLease.less)
	s.leases = slices.Insert(s.leases, i, l)
}

func (s *mState) equal(t *mState) bool {
	return s.maxTok == t.maxTok &&
		slices.Equal(s.leases, t.leases) && slices.Equal(s.revoked, t.revoked)
}

func (s *mState) hash() uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d", s.maxTok)
	for _, l := range s.leases {
		fmt.Fprintf(h, "|%s %d %d %d %t", l.id, l.w, l.drop, l.expire, l.zombie)
	}
	return h.Sum64()
}

func (s *mState) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "max token %d", s.maxTok)
	for _, l := range s.leases {
		switch {
		case l.zombie:
			fmt.Fprintf(&b, ", %s w=%d (force-released)", short(l.id), l.w)
		default:
			fmt.Fprintf(&b, ", %s w=%d", short(l.id), l.w)
		}
	}
	return b.String()
}

// step applies in to s and returns every state the backend may be in
// afterwards; none if in cannot happen in s.
func step(s0 *mState, in *mInput) []*mState {
	s := s0.clone()
	// What is surely gone by the time the operation is invoked.
	s.leases = slices.DeleteFunc(s.leases, func(l mLease) bool { return l.expire < in.call })
	s.revoked = slices.DeleteFunc(s.revoked, func(l mLease) bool {
		return l.expire < in.call || l.durable != 0 && l.durable < in.call
	})
	gone := func(l mLease) bool { return l.drop < in.ret } // may be gone at the operation's point
	switch in.kind {
	case mGrant:
		if in.token <= s.maxTok {
			return nil
		}
		s.maxTok = in.token
		return s.makeRoom(in.weight, in.limit, gone, mLease{id: in.id, w: in.weight, drop: in.drop, expire: in.expire})
	case mHeld:
		if in.queued || in.fenced || s.used()+in.ghosts+in.weight > in.limit {
			return []*mState{s}
		}
		return nil
	case mRefreshOK:
		i := s.find(in.id)
		if i < 0 || s.leases[i].zombie {
			return nil
		}
		s.leases[i].drop = max(s.leases[i].drop, in.drop)
		l := s.leases[i]
		s.leases = slices.Delete(s.leases, i, i+1)
		s.add(l)
		return []*mState{s}
	case mRefreshLost, mReleaseGone:
		if i := s.find(in.id); i >= 0 {
			if s.leases[i].zombie {
				// The old holder's release of its force-released lease
				// may free the permits early: it no longer uses them.
				if in.kind == mReleaseGone {
					s.mayGo(i)
				}
				return []*mState{s}
			}
			if !gone(s.leases[i]) {
				return nil
			}
			// A release that found the lease gone proves it gone. A
			// refresh reports it lost also when the client's own
			// deadline passed first, while the backend may still hold
			// it until it expires (and a force-release may report it).
			if in.kind == mReleaseGone {
				s.leases = slices.Delete(s.leases, i, i+1)
			}
		}
		return []*mState{s}
	case mReleaseOK:
		i := s.find(in.id)
		switch {
		case i < 0:
			return nil
		case s.leases[i].zombie:
			s.mayGo(i)
		default:
			if in.durable != 0 {
				l := s.leases[i]
				l.durable = in.durable
				s.revoked = append(s.revoked, l)
				slices.SortFunc(s.revoked, mLease.less)
			}
			s.leases = slices.Delete(s.leases, i, i+1)
		}
		return []*mState{s}
	case mReleaseMay:
		if i := s.find(in.id); i >= 0 {
			s.mayGo(i)
		}
		return []*mState{s}
	case mForce:
		return s.force(in, gone)
	case mForceMay:
		for i := range s.leases {
			s.leases[i].drop = -never
		}
		slices.SortFunc(s.leases, mLease.less)
		return []*mState{s}
	case mCrash, mRestart:
		s.restart(in)
		return []*mState{s}
	}
	return nil
}

// mayGo marks lease i as possibly gone from now on.
func (s *mState) mayGo(i int) {
	l := s.leases[i]
	l.drop = -never
	s.leases = slices.Delete(s.leases, i, i+1)
	s.add(l)
}

// makeRoom adds l if its weight fits, dropping what may be gone: one state
// for each minimal set of leases dropped.
func (s *mState) makeRoom(w, limit int64, gone func(mLease) bool, l mLease) []*mState {
	need := s.used() + w - limit
	if need <= 0 {
		s.add(l)
		return []*mState{s}
	}
	var cand []int
	for i, x := range s.leases {
		if gone(x) {
			cand = append(cand, i)
		}
	}
	if len(cand) > 12 {
		cand = cand[:12] // the oldest by ID order; never reached with a handful of workers
	}
	var out []*mState
	for mask := 0; mask < 1<<len(cand); mask++ {
		var freed int64
		minW := int64(-1)
		for b, i := range cand {
			if mask&(1<<b) != 0 {
				freed += s.leases[i].w
				if minW < 0 || s.leases[i].w < minW {
					minW = s.leases[i].w
				}
			}
		}
		if freed < need || freed-minW >= need {
			continue // not enough, or not minimal
		}
		n := s.clone()
		n.leases = n.leases[:0]
		for i, x := range s.leases {
			if b := slices.Index(cand, i); b < 0 || mask&(1<<b) == 0 {
				n.leases = append(n.leases, x)
			}
		}
		n.add(l)
		out = append(out, n)
	}
	return out
}

// force applies a force-release of every holder that reported in.freed:
// those must be there; any other lease must be gone.
func (s *mState) force(in *mInput, gone func(mLease) bool) []*mState {
	for _, id := range in.freed {
		if s.find(id) < 0 {
			return nil // reported freeing a lease it did not hold
		}
	}
	keep := s.leases[:0:0]
	for _, l := range s.leases {
		switch {
		case slices.Contains(in.freed, l.id):
			if in.strict { // permits stay taken until the holder's deadline
				l.zombie = true
				keep = append(keep, l)
			} else {
				s.revoked = append(s.revoked, l)
			}
		case l.zombie && in.strict:
			keep = append(keep, l) // its permits stay taken as before
		case l.zombie:
			l.drop = -never // --now may free it at once
			keep = append(keep, l)
		case gone(l):
			// gone before
		default:
			return nil // a lease the backend should have held and did not report
		}
	}
	s.leases = keep
	slices.SortFunc(s.revoked, mLease.less)
	return []*mState{s}
}

// restart applies a server restart: leases on disk are honoured with a
// fresh TTL; after a crash a lease granted by a handoff answered before
// its fsync may be lost (its name is then fenced: see mInput.fenced), and
// a lease whose end was not yet on disk may come back: one force-released
// with --now, or released lazily (Options.LazyRelease).
func (s *mState) restart(in *mInput) {
	for i := range s.leases {
		s.leases[i].expire = max(s.leases[i].expire, in.after)
		if in.kind == mCrash {
			s.leases[i].drop = -never
		}
	}
	if in.kind == mCrash {
		for _, l := range s.revoked {
			l.drop, l.expire = -never, max(l.expire, in.after)
			s.leases = append(s.leases, l)
		}
		s.revoked = nil
	}
	slices.SortFunc(s.leases, mLease.less)
}
