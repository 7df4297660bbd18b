package remote

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/forced"
	"github.com/sema-dev/sema/internal/wire"
)

// Backend is a client of a sema server. It is safe for concurrent use.
type Backend struct {
	cfg   Config
	base  *url.URL
	hc    *http.Client    // Config.HTTPClient, or one over owned
	owned *http.Transport // ours; nil with Config.HTTPClient
	auth  []string        // the Authorization header value, or nil
	opURL [opRelease + 1]*url.URL

	uForce, uList, uGuarantees *url.URL

	mux   *muxTransport // the ops over sema-mux (mux.go); nil behind a proxy or with Config.HTTPClient
	noMux bool          // HTTP only (tests)

	reached  atomic.Bool // the server has answered at least once
	closed   atomic.Bool
	closeCtx context.Context // cancelled by Close: ends long polls
	closeFn  context.CancelFunc

	gMu        sync.Mutex
	guarantees *sema.Guarantees

	notices forced.Notices // told of force-releases (see NotifyForced)
}

// Interface guards.
var (
	_ sema.Backend       = (*Backend)(nil)
	_ sema.Blocker       = (*Backend)(nil)
	_ sema.Inspector     = (*Backend)(nil)
	_ sema.ForceReleaser = (*Backend)(nil)
	_ sema.ForceNotifier = (*Backend)(nil)
	_ sema.Declarer      = (*Backend)(nil)

	_ sema.DeadlineReleaser = (*Backend)(nil)
)

// New returns a client of the server at cfg.URL. It does not contact the
// server.
func New(cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	base, _ := parseBase(cfg.URL)
	b := &Backend{cfg: cfg, base: base, hc: cfg.HTTPClient}
	if cfg.Token != "" {
		b.auth = []string{"Bearer " + cfg.Token}
	}
	if b.hc == nil {
		d := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}
		b.owned = &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           d.DialContext,
			TLSClientConfig:       cfg.TLSConfig,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          cfg.MaxIdleConns,
			MaxIdleConnsPerHost:   cfg.MaxIdleConns,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   cfg.DialTimeout,
			ExpectContinueTimeout: time.Second,
		}
		// No redirects: the API has none, and a redirect would drop the token.
		b.hc = &http.Client{Transport: b.owned, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}
		if p, err := b.owned.Proxy(&http.Request{URL: base}); err == nil && p == nil {
			b.mux = newMuxTransport(base, d, cfg.TLSConfig, cfg.Token)
			b.mux.onNotice = b.heard
		}
	}
	for _, o := range []op{opAcquire, opRenew, opRelease} {
		b.opURL[o] = b.endpoint(o.path())
	}
	b.uForce = b.endpoint(wire.PathForceRelease)
	b.uList = b.endpoint(wire.PathLocks)
	b.uGuarantees = b.endpoint(wire.PathGuarantees)
	b.closeCtx, b.closeFn = context.WithCancel(context.Background())
	return b, nil
}

// endpoint returns an API path under the base URL.
func (b *Backend) endpoint(path string) *url.URL {
	u := *b.base
	u.Path += path
	if u.RawPath != "" {
		u.RawPath += path
	}
	return &u
}

// URL returns the server URL the backend talks to.
func (b *Backend) URL() string { return b.base.String() }

// Renew extends the lease id of name by ttl from now, on the server's clock.
// It gives up when ctx ends or after Config.RequestTimeout.
func (b *Backend) Renew(ctx context.Context, name, id string, ttl time.Duration) (sema.Grant, error) {
	if err := sema.ValidateTTL(ttl); err != nil {
		return sema.Grant{}, err
	}
	if b.closed.Load() {
		return sema.Grant{}, sema.ErrClosed
	}
	buf := getBuffer()
	in := wire.RenewRequest{Name: name, ID: id, TTLMillis: ttlMillis(ttl)}
	buf.b = in.Append(buf.b[:0])
	l := wire.Lease{Name: name, ID: id}
	found, err := b.leaseCall(ctx, opRenew, name, buf.b, id, b.cfg.RequestTimeout, &l)
	putBuffer(buf)
	if err != nil {
		return sema.Grant{}, err
	}
	if !found || l.ID != id {
		return sema.Grant{}, fmt.Errorf("remote: renew %q: %w: the server answered with another lease", name, sema.ErrUnavailable)
	}
	g := grantOf(&l)
	g.Waited = 0
	return g, nil
}

// Release frees the lease id of name. It gives up when ctx ends or after
// Config.RequestTimeout.
func (b *Backend) Release(ctx context.Context, name, id string) error {
	if b.closed.Load() {
		return sema.ErrClosed
	}
	return b.release(ctx, name, id, b.cfg.RequestTimeout)
}

// ReleaseBy frees the lease id of name like Release, but is bounded by
// deadline (and Config.RequestTimeout) instead of by ctx, whose
// cancellation it ignores: what the core's Lease.Release wants (a release
// that completes even if the caller's context ends, within the client's
// release timeout), without deriving a context with a timeout per call,
// whose timer and cancellation hook cost more than the rest of the
// client's work for a release on loopback.
func (b *Backend) ReleaseBy(ctx context.Context, name, id string, deadline time.Time) error {
	if b.closed.Load() {
		return sema.ErrClosed
	}
	timeout := time.Until(deadline)
	if timeout <= 0 {
		return context.DeadlineExceeded
	}
	if t := b.cfg.RequestTimeout; t > 0 && t < timeout {
		timeout = t
	}
	if ctx.Done() != nil { // the core's has none
		ctx = context.WithoutCancel(ctx)
	}
	return b.release(ctx, name, id, timeout)
}

func (b *Backend) release(ctx context.Context, name, id string, timeout time.Duration) error {
	buf := getBuffer()
	in := wire.ReleaseRequest{Name: name, ID: id}
	buf.b = in.Append(buf.b[:0])
	var l wire.Lease
	_, err := b.leaseCall(ctx, opRelease, name, buf.b, id, timeout, &l)
	putBuffer(buf)
	return err
}

// Close ends waiting acquires with sema.ErrClosed and closes idle
// connections. Leases held through this backend stay held on the server
// until released by another client or expired.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	b.closeFn()
	if b.mux != nil {
		b.mux.close(b.giveBackTimeout())
	}
	if b.owned != nil {
		b.owned.CloseIdleConnections()
	}
	return nil
}

// grantOf converts a wire lease.
func grantOf(l *wire.Lease) sema.Grant {
	return sema.Grant{
		Name: l.Name, ID: l.ID, Token: l.Token, Owner: l.Owner,
		Weight: l.Weight, Limit: l.Limit,
		AcquiredAt: l.AcquiredAt, ExpiresAt: l.ExpiresAt,
		Waited: waited(l.WaitedMillis),
	}
}

// ttlMillis rounds up to whole milliseconds, so the server never expires a
// lease earlier than the client computed.
func ttlMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// waited converts fractional milliseconds, clamping junk to [0, 24h].
func waited(ms float64) time.Duration {
	switch {
	case !(ms > 0): // also NaN
		return 0
	case ms > float64(sema.MaxTTL/time.Millisecond):
		return sema.MaxTTL
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// NotifyForced makes the backend call f for each of its leases the server
// says was force-released, by a notice on the sema-mux connection, so
// that its holder learns at once (sema.ForceNotifier). Without sema-mux
// (behind a proxy, with Config.HTTPClient) a holder learns at its next
// renewal.
func (b *Backend) NotifyForced(f func(sema.ForceNotice)) (stop func()) { return b.notices.Add(f) }

// heard passes a notice of the server on.
func (b *Backend) heard(n wire.Notice) {
	if f := n.Forced; f != nil {
		b.notices.Tell(f.Name, []string{f.ID}, f.By)
	}
}
