package redis

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/forced"
)

// Backend is the Redis backend. It is safe for concurrent use.
type Backend struct {
	rdb     goredis.UniversalClient
	single  *goredis.Client        // rdb, for one server
	cluster *goredis.ClusterClient // rdb, for a cluster
	ks      keyspace
	cfg     Config
	g       sema.Guarantees
	channel string // where this backend's waiters are told of their grants
	forced  string // where every backend on the prefix is told of force-releases
	live    string // "1": a waiter whose channel has no subscriber is gone
	waitTTL string // a waiter's lease in the queue, in ms
	wake    wakeups
	closed  atomic.Bool
	done    chan struct{} // closed by Close
	waiting sync.WaitGroup

	notices  forced.Notices // told of force-releases (see NotifyForced)
	noticing atomic.Bool    // a client registered with NotifyForced

	inflight atomic.Int32           // script calls in flight
	apOnce   sync.Once              // makes ap
	ap       *goredis.AutoPipeliner // for calls made while others are in flight
}

// Interface guards.
var (
	_ sema.Backend       = (*Backend)(nil)
	_ sema.Blocker       = (*Backend)(nil)
	_ sema.Inspector     = (*Backend)(nil)
	_ sema.ForceReleaser = (*Backend)(nil)
	_ sema.ForceNotifier = (*Backend)(nil)
	_ sema.Declarer      = (*Backend)(nil)
)

// Open parses rawURL (see [ParseURL]) and returns a backend connected to it.
func Open(ctx context.Context, rawURL string) (*Backend, error) {
	cfg, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return New(ctx, cfg)
}

// probeTimeout bounds New's checks of the server: one that accepts
// connections but does not answer (stopped, overloaded) is an error
// within that time, not after go-redis's retries of every dial and read.
const probeTimeout = 10 * time.Second

// New connects to Redis, checks that it can serve sema (version 7 or
// later, a primary, the scripts load) and what it keeps across a restart,
// within ctx and at most probeTimeout, and returns the backend. go-redis's
// clients are made with ContextTimeoutEnabled, so that every call respects
// its context's deadline. Close closes the client.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	b := &Backend{
		ks:      keyspace{cfg.Prefix},
		cfg:     cfg,
		channel: cfg.Prefix + "w:" + strings.ToLower(rand.Text()),
		forced:  cfg.Prefix + "forced",
		waitTTL: fmt.Sprint((3 * cfg.Recheck).Milliseconds()),
		done:    make(chan struct{}),
	}
	b.wake.ws = make(map[string]chan string)
	b.wake.early = make(map[string]earlyGrant)
	if cfg.Single != nil {
		o := *cfg.Single
		o.ContextTimeoutEnabled = true
		b.single = goredis.NewClient(&o)
		b.rdb, b.live = b.single, "1"
	} else {
		o := *cfg.Cluster
		o.ContextTimeoutEnabled = true
		b.cluster = goredis.NewClusterClient(&o)
		// Messages to a channel reach subscribers on every node, but
		// PUBLISH counts only the node's own: it cannot tell a dead waiter.
		b.rdb, b.live = b.cluster, "0"
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	srv, err := b.probe(pctx)
	if err != nil {
		_ = b.rdb.Close()
		if pctx.Err() != nil && ctx.Err() == nil {
			hint := ""
			if cfg.tls() {
				// A server without TLS takes the TLS handshake for the
				// start of a command and waits for its end.
				hint = " (if the server has no TLS: redis://)"
			}
			return nil, fmt.Errorf("redis: %s: %w: no answer within %v%s", cfg.addrs(), sema.ErrUnavailable, probeTimeout, hint)
		}
		return nil, err
	}
	b.g = guarantees(cfg, srv, b.cluster != nil)
	if cfg.WaitReplicas > srv.replicas {
		cfg.Logger.Warn("sema: redis: fewer replicas connected than wait_replicas; grants fail until they connect",
			"connected", srv.replicas, "wait_replicas", cfg.WaitReplicas)
	}
	return b, nil
}

// Guarantees declares what the backend promises with this server.
func (b *Backend) Guarantees() sema.Guarantees { return b.g }

// Close fails the waits in progress with sema.ErrClosed (taking their
// requests out of the queues), then closes the connections. Leases still
// held stay in Redis until they are released by ID or expire.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	close(b.done)
	b.waiting.Wait()
	b.wake.close()
	return b.rdb.Close()
}

// check validates req and reports whether the backend is open.
func (b *Backend) check(req *sema.Request) error {
	if b.closed.Load() {
		return sema.ErrClosed
	}
	return req.Validate()
}

// outcome is what the acquire script decided.
type outcome struct {
	kind   int64 // 1 granted, 2 queued, 0 held, -1 limit mismatch, -3 force-released, -4 held with another weight
	grant  sema.Grant
	now    int64 // Redis's clock, ms
	pos    int64 // place in the queue (queued)
	next   int64 // lower bound of the earliest holder expiry, ms (queued)
	limit  int64 // the name's limit (held, mismatch)
	weight int64 // the weight the lease ID holds (heldWeight)
	held   *sema.HeldError
}

const (
	granted     = 1
	queued      = 2
	held        = 0
	mismatch    = -1
	leaseLost   = -2
	forceFreed  = -3
	heldWeight  = -4
	noneExpires = 9000000000000000 // the scripts' "no holder" expiry
)

// acquireOnce runs the acquire script: mode "t" never queues, "w" queues
// the request (or refreshes its place). The call outlives ctx by up to
// callGrace (see callContext). Callers look at ctx once it has answered.
func (b *Backend) acquireOnce(ctx context.Context, req *sema.Request, mode string) (outcome, error) {
	ctx, done := b.callContext(ctx)
	defer done()
	ttl := (req.TTL + time.Millisecond - 1).Milliseconds()
	v, acks, err := b.run(ctx, scripts().acquire, req.Name, req.ID, req.Limit, req.Weight, ttl, label(req), mode, b.waitTTL, b.channel, b.live)
	if err != nil {
		return outcome{}, wrap("acquire", req.Name, err)
	}
	o, err := decodeOutcome(req, v)
	if err != nil {
		return o, fmt.Errorf("redis: acquire %q: %w", req.Name, err)
	}
	if o.kind == granted && acks < int64(b.cfg.WaitReplicas) {
		return o, b.unreplicated(req.Name, req.ID, acks)
	}
	return o, nil
}

// callGrace is how long an acquire script call may outlive its caller's
// context.
const callGrace = time.Second

// callContext returns the context of an acquire script call: it ends
// callGrace (plus the WAIT timeout) after ctx does, not with it. A script
// abandoned on the wire could still run after the clean-up that follows
// on another connection (Redis reads its connections in any order) and
// grant a lease nobody takes; waiting a little for the answer keeps the
// order in all but a stalled server. A call still unanswered then is
// abandoned, and such a grant stays until its TTL.
func (b *Backend) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	call, cancel := context.WithCancel(context.WithoutCancel(ctx))
	grace := callGrace
	if b.cfg.WaitReplicas > 0 {
		grace += b.cfg.WaitTimeout
	}
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(grace, cancel) })
	return call, func() {
		stop()
		cancel()
	}
}

// decodeOutcome reads the acquire script's answer.
func decodeOutcome(req *sema.Request, v any) (outcome, error) {
	var o outcome
	a, err := reply(v)
	if err != nil {
		return o, err
	}
	if o.kind, err = intAt(a, 0); err != nil {
		return o, err
	}
	switch o.kind {
	case granted:
		n, err := ints(a, 1, 4) // token, acquired, expires, now
		if err == nil {
			err = checkGrant(n[0], n[1], n[2])
		}
		if err != nil {
			return o, err
		}
		o.grant = grantOf(req, n[0], n[1], n[2])
		o.now = n[3]
	case queued:
		n, err := ints(a, 1, 3) // now, position, next expiry
		if err != nil {
			return o, err
		}
		o.now, o.pos, o.next = n[0], n[1], n[2]
	case held:
		n, err := ints(a, 1, 2) // limit, waiters
		if err != nil {
			return o, err
		}
		hs, err := holdersAt(a, 3)
		if err != nil {
			return o, err
		}
		o.held = &sema.HeldError{Name: req.Name, Limit: n[0], Holders: hs, Waiters: int(n[1])}
	case mismatch:
		if o.limit, err = intAt(a, 1); err != nil {
			return o, err
		}
	case heldWeight:
		if o.weight, err = intAt(a, 1); err != nil {
			return o, err
		}
	case forceFreed:
	default:
		return o, fmt.Errorf("%w: unknown acquire outcome %d", ErrCorrupt, o.kind)
	}
	return o, nil
}

func grantOf(req *sema.Request, token, acquired, expires int64) sema.Grant {
	return sema.Grant{
		Name: req.Name, ID: req.ID, Token: uint64(token), Owner: req.Owner, Weight: req.Weight, Limit: req.Limit,
		AcquiredAt: time.UnixMilli(acquired), ExpiresAt: time.UnixMilli(expires),
	}
}

// refusal is the error of an outcome that is neither a grant nor a place
// in the queue.
func refusal(req *sema.Request, o outcome) error {
	switch o.kind {
	case held:
		return o.held
	case mismatch:
		return fmt.Errorf("redis: acquire %q with limit %d: %w: its holders and waiters use limit %d",
			req.Name, req.Limit, sema.ErrLimitMismatch, o.limit)
	case forceFreed:
		return fmt.Errorf("redis: acquire %q: lease %s: %w", req.Name, req.ID, sema.ErrForceReleased)
	case heldWeight:
		return fmt.Errorf("redis: acquire %q: %w: lease id %q holds weight %d, asked %d",
			req.Name, sema.ErrInvalidArgument, req.ID, o.weight, req.Weight)
	}
	return fmt.Errorf("redis: acquire %q: %w: unexpected outcome %d", req.Name, ErrCorrupt, o.kind)
}

// TryAcquire grants the request if its permits are free and nobody waits.
func (b *Backend) TryAcquire(ctx context.Context, req sema.Request) (sema.Grant, error) {
	if err := b.check(&req); err != nil {
		return sema.Grant{}, err
	}
	o, err := b.acquireOnce(ctx, &req, "t")
	if err != nil {
		return sema.Grant{}, err
	}
	if o.kind != granted {
		return sema.Grant{}, refusal(&req, o)
	}
	b.holding()
	return o.grant, nil
}

// Renew extends a live lease by ttl from now, by Redis's clock.
func (b *Backend) Renew(ctx context.Context, name, id string, ttl time.Duration) (sema.Grant, error) {
	if b.closed.Load() {
		return sema.Grant{}, sema.ErrClosed
	}
	if err := errors.Join(sema.ValidateName(name), sema.ValidateID(id), sema.ValidateTTL(ttl)); err != nil {
		return sema.Grant{}, err
	}
	ms := (ttl + time.Millisecond - 1).Milliseconds()
	v, acks, err := b.run(ctx, scripts().renew, name, id, ms)
	if err != nil {
		return sema.Grant{}, wrap("renew", name, err)
	}
	a, err := reply(v)
	if err != nil {
		return sema.Grant{}, fmt.Errorf("redis: renew %q: %w", name, err)
	}
	switch kind, _ := intAt(a, 0); kind {
	case leaseLost:
		return sema.Grant{}, fmt.Errorf("redis: renew %q: lease %s: %w", name, id, sema.ErrLeaseLost)
	case forceFreed:
		return sema.Grant{}, fmt.Errorf("redis: renew %q: lease %s: %w", name, id, sema.ErrForceReleased)
	case granted:
	default:
		return sema.Grant{}, fmt.Errorf("redis: renew %q: %w: unexpected answer", name, ErrCorrupt)
	}
	n, err := ints(a, 1, 4) // token, acquired, expires, weight
	if err == nil {
		err = checkGrant(n[0], n[1], n[2])
	}
	if err != nil {
		return sema.Grant{}, fmt.Errorf("redis: renew %q: %w", name, err)
	}
	if acks < int64(b.cfg.WaitReplicas) {
		return sema.Grant{}, fmt.Errorf("redis: renew %q: %w: %d of %d replicas acknowledged within %v",
			name, sema.ErrUnavailable, acks, b.cfg.WaitReplicas, b.cfg.WaitTimeout)
	}
	return sema.Grant{Name: name, ID: id, Token: uint64(n[0]), Weight: n[3],
		AcquiredAt: time.UnixMilli(n[1]), ExpiresAt: time.UnixMilli(n[2])}, nil
}

// Release ends a live lease by ID and hands its permits to the waiters
// they now serve. An unknown or expired ID is an error wrapping
// sema.ErrNotHeld.
func (b *Backend) Release(ctx context.Context, name, id string) error {
	if b.closed.Load() {
		return sema.ErrClosed
	}
	if err := errors.Join(sema.ValidateName(name), sema.ValidateID(id)); err != nil {
		return err
	}
	return b.release(ctx, name, id)
}

func (b *Backend) release(ctx context.Context, name, id string) error {
	v, err := b.script(ctx, scripts().release, name, id, b.live)
	if err != nil {
		return wrap("release", name, err)
	}
	switch v {
	case int64(1):
		return nil
	case int64(2):
		return fmt.Errorf("redis: release %q: lease %s: %w", name, id, sema.ErrForceReleased)
	case int64(0):
		return fmt.Errorf("redis: release %q: lease %s: %w", name, id, sema.ErrNotHeld)
	}
	return fmt.Errorf("redis: release %q: %w: unexpected answer %v", name, ErrCorrupt, v)
}
