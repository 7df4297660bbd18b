package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/forced"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Backend is the etcd backend. It is safe for concurrent use. Make one with
// [Open] or [OpenURL].
type Backend struct {
	cli   *clientv3.Client
	cfg   Config
	k     keys
	log   *slog.Logger
	epoch time.Time // base of now()

	mu    sync.Mutex
	recs  map[string]*rec  // the leases this backend granted, by lease ID
	waits map[waitKey]bool // the Acquire calls of this backend in flight
	pool  leasePool
	local locals
	keep  *keeper
	slots slots

	closed chan struct{}  // closed by Close, under mu
	bg     sync.WaitGroup // waiters and background steps, which Close waits for

	notices forced.Notices // told of force-releases (see NotifyForced)
}

// rec is what a backend remembers of a lease it granted, so that renew and
// release need no read to find the lease's key.
type rec struct {
	name  string
	key   string
	rev   int64 // create revision: the token
	lease clientv3.LeaseID
	ttl   int64 // the etcd lease's granted TTL, s
	want  int64 // the TTL it was asked for, s (its pool)
	limit int64
	val   value
	owned bool // the etcd lease is this backend's alone: it may reuse it after release

	expires time.Duration // b.now() before which etcd cannot expire the lease; guarded by b.mu
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

// Open connects to etcd. It fails, with an error wrapping
// [sema.ErrUnavailable], if no endpoint answers within cfg.DialTimeout
// (saying what the last connection failed on: a refused port, a TLS
// handshake), and with one wrapping [sema.ErrPermission] if the
// credentials or the client's certificate are refused.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		Username:    cfg.Username,
		Password:    cfg.Password,
		TLS:         cfg.TLS,
		Logger:      zap.NewNop(),
		Context:     context.WithoutCancel(ctx),
		// Probe dead connections, so that a member that vanished without
		// closing its sockets is noticed and its calls fail over.
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
	})
	if err != nil {
		return nil, openError(cfg, err)
	}
	// A linearizable read needs a leader: it proves the cluster serves.
	pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	// The KV service itself, not cli.Get: the client's wrapper turns a
	// deadline into the bare context error, dropping what the connection
	// failed on (a TLS handshake, a refused port).
	if _, err := etcdserverpb.NewKVClient(cli.ActiveConnection()).Range(pctx,
		&etcdserverpb.RangeRequest{Key: []byte(cfg.Prefix + "/"), CountOnly: true}, grpc.WaitForReady(true)); err != nil {
		cli.Close()
		return nil, openError(cfg, rpctypes.Error(err)) // etcd's own errors as the client names them
	}
	b := &Backend{cli: cli, cfg: cfg, k: newKeys(cfg.Prefix), log: cfg.Logger, epoch: time.Now(),
		recs: make(map[string]*rec), waits: make(map[waitKey]bool), pool: newLeasePool(), local: newLocals(), keep: &keeper{cli: cli},
		slots: slots{nonce: rand.Uint32()}, closed: make(chan struct{})}
	b.bg.Add(1)
	go b.anchor()
	return b, nil
}

// OpenURL opens the backend named by an etcd:// or etcds:// URL (see
// [ParseURL]).
func OpenURL(ctx context.Context, rawURL string) (*Backend, error) {
	cfg, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return Open(ctx, cfg)
}

func openError(cfg Config, err error) error {
	why, refused := dialError(cfg, err)
	err = classify(err)
	switch {
	case refused:
		return fmt.Errorf("etcd: connecting to %v: %w: %s", cfg.Endpoints, sema.ErrPermission, why)
	case why != "":
		return fmt.Errorf("etcd: no endpoint of %v answered within %v: %w: %s", cfg.Endpoints, cfg.DialTimeout, sema.ErrUnavailable, why)
	case errors.Is(err, sema.ErrUnavailable):
		return fmt.Errorf("etcd: no endpoint of %v answered within %v: %w", cfg.Endpoints, cfg.DialTimeout, err)
	}
	return fmt.Errorf("etcd: connecting to %v: %w", cfg.Endpoints, err)
}

// dialError is what gRPC last said a connection failed on (a refused port,
// a TLS handshake), with a hint where a setting of the URL is the likely
// cause, or "" if err does not say. refused says the server turned the
// client's certificate (or its lack of one) down.
func dialError(cfg Config, err error) (why string, refused bool) {
	m := status.Convert(err).Message()
	_, m, ok := strings.Cut(m, "latest balancer error: ")
	if !ok {
		return "", false
	}
	m = strings.TrimPrefix(m, "connection error: desc = ")
	m = strings.TrimPrefix(strings.Trim(m, `"`), "transport: Error while dialing: ")
	noCert := cfg.TLS != nil && len(cfg.TLS.Certificates) == 0
	closed := strings.HasSuffix(m, "EOF") || strings.Contains(m, "broken pipe") || strings.Contains(m, "connection reset")
	handshake := strings.Contains(m, "authentication handshake failed")
	switch {
	case strings.Contains(m, "x509: "):
		m += " (cacert= names the CA that signed the server's certificate)"
	case strings.Contains(m, "tls: bad certificate"), strings.Contains(m, "tls: certificate required"):
		return m + " (the server wants a client certificate: cert= and key=)", true
	case handshake && (closed || strings.Contains(m, "first record does not look like a TLS handshake")):
		m += " (if the server has no TLS: etcd://)"
	case noCert && closed:
		// TLS 1.3: a server may refuse a client without a certificate
		// after the handshake, by closing the connection.
		m += " (if the server wants a client certificate: cert= and key=)"
	case strings.Contains(m, "error reading server preface"):
		m += " (if the server wants TLS: etcds://)"
	}
	return m, false
}

// gone records that the entry key (created at rev) is deleted: its local
// waiters are told, and its slot, if it is this backend's, is reused.
func (b *Backend) gone(key string, rev int64) {
	if b.local.gone(key, rev) {
		if slot, ok := b.slots.slotOf(key); ok {
			b.slots.put(slot)
		}
	}
}

// Client returns the etcd client, for fenced writes of the user's own
// (compare a key's revision with a lease's token in a Txn).
func (b *Backend) Client() *clientv3.Client { return b.cli }

// now is the backend's monotonic clock.
func (b *Backend) now() time.Duration { return time.Since(b.epoch) }

// Guarantees declares what the etcd backend promises.
func (b *Backend) Guarantees() sema.Guarantees {
	return sema.Guarantees{
		Scope: sema.ScopeCluster, FIFO: true, Linearizable: true, DurableFencing: true, SurvivesFailover: true,
		Wakeup: "etcd watch",
		Notes: "expiry by etcd leases (whole seconds, at least etcd's minimum TTL); " +
			"tokens are etcd revisions: they survive restarts, compaction and leader changes",
	}
}

// Close stops waiters (they return sema.ErrClosed), gives back the idle
// etcd leases and closes the client. Leases still held expire at their TTL
// unless released first.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.isClosed() {
		b.mu.Unlock()
		return nil
	}
	close(b.closed)
	b.mu.Unlock()
	b.bg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.RequestTimeout)
	defer cancel()
	for _, id := range b.pool.drain() {
		_, _ = b.cli.Revoke(ctx, id)
	}
	b.keep.close()
	return b.cli.Close()
}

// isClosed reports whether Close was called.
func (b *Backend) isClosed() bool {
	select {
	case <-b.closed:
		return true
	default:
		return false
	}
}

// call returns a context for one call to etcd: ctx bounded by
// RequestTimeout. Close cancels the calls in flight by closing the client.
func (b *Backend) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.cfg.RequestTimeout)
}

// enter registers a call that Close must wait for (a waiter, a background
// step); it fails once Close has begun.
func (b *Backend) enter() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.isClosed() {
		return false
	}
	b.bg.Add(1)
	return true
}

// fail wraps an error of etcd for op ("acquire \"name\"", …) in the sema
// sentinel that says what it means.
func (b *Backend) fail(op string, err error) error {
	if b.isClosed() {
		return fmt.Errorf("etcd: %s: %w", op, sema.ErrClosed)
	}
	return fmt.Errorf("etcd: %s: %w", op, classify(err))
}

// classify maps an etcd client error to a sema sentinel, keeping it in the
// chain.
func classify(err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrAuthFailed), errors.Is(err, rpctypes.ErrPermissionDenied),
		errors.Is(err, rpctypes.ErrInvalidAuthToken), errors.Is(err, rpctypes.ErrUserEmpty),
		errors.Is(err, rpctypes.ErrAuthOldRevision):
		return fmt.Errorf("%w: %w", sema.ErrPermission, err)
	case errors.Is(err, rpctypes.ErrNoSpace):
		return fmt.Errorf("%w: etcd is out of space (NOSPACE alarm): %w", sema.ErrUnavailable, err)
	}
	code := status.Code(err)
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	}
	if code == codes.Unauthenticated || code == codes.PermissionDenied {
		return fmt.Errorf("%w: %w", sema.ErrPermission, err)
	}
	return fmt.Errorf("%w: %w", sema.ErrUnavailable, err)
}
