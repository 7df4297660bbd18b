// Package backendtest is the conformance suite every sema backend passes.
//
// A backend's tests call [Run] with a [Config]:
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, backendtest.Config{
//			New: func(t *testing.T) sema.Backend { return mem.New() },
//		})
//	}
//
// The suite checks the contract of the sema package documentation: exclusion
// under a hammer with a checker that watches live weights continuously,
// limits and weights (also while a name only has waiters), FIFO without
// barging (for backends that declare FIFO), expiry, compare-and-extend
// refresh that really extends the expiry, idempotent acquire and release by
// lease ID, cancellation without leaked permits, a Close that ends waiting
// acquires, strictly increasing tokens (after expiry, force-release and
// reopen), leases that outlive a reopen, names that look like paths or
// queries, introspection, force-release, bad input, a lease whose backend
// stops answering, and event-driven wake-up of waiters.
//
// Every backend must be a [sema.Inspector]: the suite observes holders and
// waiters through Describe to know the order of arrivals and to check what
// a backend did, rather than waiting for a while and hoping.
package backendtest

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

// Config describes the backend under test.
type Config struct {
	// New returns a backend for one subtest. It may return a fresh backend
	// or a new client of a shared server each time: every subtest uses its
	// own unique names. The suite closes what New returns.
	New func(t *testing.T) sema.Backend
	// Peer, if set, returns a second, independent handle on the same store
	// as b (another client of the same server, the same directory opened
	// again), as another process would have. The suite closes it. Default:
	// b itself is shared.
	Peer func(t *testing.T, b sema.Backend) sema.Backend
	// TTL is the short lease TTL the expiry tests use (default 1s: its
	// safety margin, TTL/5, must absorb scheduling stalls of a loaded
	// machine).
	// Backends with coarse expiry (whole seconds) set it higher, up to a
	// few seconds: the suite gives up on what must happen after 20s.
	TTL time.Duration
	// Reopen, if set, closes b and opens the same store again, as after a
	// restart of the backend; the suite checks that tokens never go back
	// and that a lease held across the reopen stays held, renewable and
	// releasable.
	Reopen func(t *testing.T, b sema.Backend) sema.Backend
	// ReopenEndsLeases declares that closing a handle ends the leases
	// acquired through it, as the exit of their holder's process does
	// (file://: the kernel frees a dead process's permits at once). The
	// suite then checks that the leases of the reopened handle are gone,
	// and that a lease held through Peer (required) outlives the reopen.
	ReopenEndsLeases bool
	// FallbackRecheck is the longest a waiter of this backend goes without
	// looking at the name again when no event arrives: its bound against
	// lost wake-ups (the file backend's Config.Recheck, the core's re-check
	// for a Notifier). The suite checks that releases wake waiters well
	// before it: the median hand-off must take under a tenth of it.
	// Default 1s, the core's and the file backend's default.
	FallbackRecheck time.Duration
	// ForceNoticeAfter is how long a lease of a sema.ForceNotifier must
	// have been held before a force-release is told to its holder at once
	// (file://: its janitor readies the holder's doorbell within a
	// second). The suite force-releases a lease held that long and
	// expects its holder told well before its next renewal.
	ForceNoticeAfter time.Duration
	// NoForceNotice declares that this backend, although a
	// sema.ForceNotifier, cannot tell its holders in the configuration
	// under test (a sema serve client restricted to plain HTTP): they learn
	// of a force-release at their next renewal.
	NoForceNotice bool
}

// hang bounds every wait for something that must happen: reaching it means
// the backend hung, not that it was slow.
const hang = 20 * time.Second

// Run runs the whole suite as subtests of t.
func Run(t *testing.T, cfg Config) {
	t.Helper()
	if cfg.New == nil {
		t.Fatal("backendtest: Config.New is nil")
	}
	if cfg.ReopenEndsLeases && (cfg.Reopen == nil || cfg.Peer == nil) {
		t.Fatal("backendtest: Config.ReopenEndsLeases needs Reopen and Peer")
	}
	if cfg.TTL == 0 {
		cfg.TTL = time.Second
	}
	if cfg.FallbackRecheck == 0 {
		cfg.FallbackRecheck = time.Second
	}
	tests := []struct {
		name string
		fn   func(*testing.T, *env)
	}{
		{"BadInput", testBadInput},
		{"AlreadyDoneContext", testAlreadyDoneContext},
		{"TryAcquireNeverWaits", testTryAcquire},
		{"IdempotentAcquireByID", testIdempotentAcquire},
		{"IdempotentAcquireWhileQueued", testIdempotentQueued},
		{"AcquireByIDAfterRelease", testAcquireAfterRelease},
		{"RetryAskingOtherwise", testRetryAskingOtherwise},
		{"Weights", testWeights},
		{"LimitMismatch", testLimitMismatch},
		{"LimitMismatchWithWaiters", testLimitMismatchWaiters},
		{"ExclusionHammer", testExclusionHammer},
		{"MutexCounter", testMutexCounter},
		{"FIFONoBarging", testFIFO},
		{"FIFOHeadCancelled", testFIFOHeadCancel},
		{"FIFOOrder", testFIFOOrder},
		{"CancelWhileWaiting", testCancelWhileWaiting},
		{"ReleaseOfAQueuedID", testReleaseOfAQueuedID},
		{"BlockerCancelLeaksNothing", testBlockerCancel},
		{"CloseWhileWaiting", testCloseWhileWaiting},
		{"WakeupByEvent", testWakeup},
		{"TTLExpiryFreesPermits", testExpiry},
		{"RefreshExtendsExpiry", testRefreshExtends},
		{"RefreshAfterExpiryIsLost", testRefreshAfterExpiry},
		{"ReleaseIdempotentNeverTouchesNewer", testReleaseIdempotent},
		{"ReleaseFromOtherGoroutine", testReleaseOtherGoroutine},
		{"KeepaliveAndNoRenewAfterRelease", testKeepalive},
		{"MaxHold", testMaxHold},
		{"TokensStrictlyIncreasing", testTokens},
		{"TokensSurviveReopen", testTokensReopen},
		{"LeaseSurvivesReopen", testReopenHeld},
		{"DescribeAndList", testDescribe},
		{"NamesLikePathsAndQueries", testNames},
		{"ForceReleaseDelaysWaiters", testForceReleaseDelays},
		{"ForceReleaseNow", testForceReleaseNow},
		{"ForceReleasedHolderReleases", testForceReleasedHolderReleases},
		{"ForceReleaseSurvivesReopen", testForceReleaseReopen},
		{"ForceReleasedIDNotGrantedAgain", testForceReleasedIDNotGrantedAgain},
		{"ForceReleaseOfAWaiter", testForceReleaseOfAWaiter},
		{"ForceReleaseToldToHolder", testForceReleaseTold},
		{"StalledBackendCancelsLease", testStalledBackend},
		{"Do", testDo},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newEnv(t, cfg))
		})
	}
}

// env is one subtest's view of the backend.
type env struct {
	t      *testing.T
	cfg    Config
	b      sema.Backend // the backend New returned
	peer   sema.Backend // another handle on the same store
	c      *sema.Client // client over b
	p      *sema.Client // client over peer
	prefix string
	g      sema.Guarantees
}

func newEnv(t *testing.T, cfg Config) *env {
	b := cfg.New(t)
	e := &env{t: t, cfg: cfg, b: b, peer: b}
	t.Cleanup(func() { _ = e.b.Close() })
	if _, ok := b.(sema.Inspector); !ok {
		t.Fatalf("backendtest: %T is not a sema.Inspector (Describe and List are part of the contract)", b)
	}
	if cfg.Peer != nil {
		e.peer = cfg.Peer(t, b)
		t.Cleanup(func() { _ = e.peer.Close() })
	}
	// The clients are never closed: the suite closes the backends itself.
	e.c = sema.New(e.b)
	e.p = sema.New(e.peer)
	if d, ok := b.(sema.Declarer); ok {
		e.g = d.Guarantees()
	}
	r := strings.ToLower(rand.Text()[:8])
	e.prefix = "bt/" + strings.ReplaceAll(t.Name(), "/", ".") + "/" + r + "/"
	return e
}

// client returns the client over b for even i and over the peer for odd
// i, so that concurrent workers mix both handles.
func (e *env) client(i int) *sema.Client {
	if i%2 == 1 {
		return e.p
	}
	return e.c
}

// name returns a unique name for this subtest.
func (e *env) name(s string) string { return e.prefix + s }

func (e *env) ctx(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	e.t.Cleanup(cancel)
	return ctx
}

// inspector returns the backend as an Inspector (newEnv checked it is one).
func (e *env) inspector() sema.Inspector { return e.b.(sema.Inspector) }

// describe returns the status of name or fails the test.
func (e *env) describe(name string) sema.Status {
	e.t.Helper()
	st, err := e.inspector().Describe(e.ctx(10*time.Second), name)
	if err != nil {
		e.t.Fatalf("Describe(%q): %v", name, err)
	}
	return st
}

func (e *env) mustAcquire(s *sema.Semaphore, opts ...sema.AcquireOption) *sema.Lease {
	e.t.Helper()
	l, err := s.Acquire(e.ctx(hang), opts...)
	if err != nil {
		e.t.Fatalf("Acquire(%q): %v", s.Name(), err)
	}
	return l
}

func (e *env) mustRelease(l *sema.Lease) {
	e.t.Helper()
	if err := l.Release(context.Background()); err != nil {
		e.t.Fatalf("Release(%q): %v", l.Name(), err)
	}
}

// request is a raw request for the backend's own methods.
func request(name, id string, limit, weight int64) sema.Request {
	return sema.Request{Name: name, ID: id, Owner: "o-" + id, Limit: limit, Weight: weight, TTL: time.Minute}
}

// await returns what ch delivers, or fails the test after hang.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(hang):
		t.Fatalf("%s: nothing after %v", what, hang)
		var zero T
		return zero
	}
}
