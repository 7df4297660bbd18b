package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/store"
	"github.com/sema-dev/sema/internal/wire"
)

// Server serves the sema HTTP/JSON API v1 over a backend. It is an
// http.Handler; the caller owns the http.Server, the listener and the
// backend.
type Server struct {
	cfg     Config
	b       sema.Backend
	eng     engine
	creds   credentials
	m       *metrics
	log     *slog.Logger
	guar    sema.Guarantees
	metrics http.Handler
	routes  map[string]*route

	closing context.Context
	close   context.CancelFunc
	closed  atomic.Bool
	bufs    sync.Pool

	connMu sync.Mutex
	conns  map[liveConn]struct{} // taken-over and sema-mux connections (h1conn.go, mux.go)
	connWG sync.WaitGroup
}

// route is one endpoint. role 0 means no authentication.
type route struct {
	method, path, label string
	role                Role
	h                   func(s *Server, w http.ResponseWriter, r *http.Request, who caller)
	hot                 hotHandler // instead of h: the hot routes (h1conn.go serves them too)
}

// routeTable lists every endpoint; api/openapi.yaml documents the same.
func routeTable() []*route {
	return []*route{
		{http.MethodPost, wire.PathAcquire, routeAcquire, RoleClient, nil, (*Server).hotAcquire},
		{http.MethodPost, wire.PathRenew, routeRenew, RoleClient, nil, (*Server).hotRenew},
		{http.MethodPost, wire.PathRelease, routeRelease, RoleClient, nil, (*Server).hotRelease},
		{http.MethodGet, wire.PathLock + "{name}", routeDescribe, RoleClient, (*Server).handleDescribe, nil},
		{http.MethodGet, wire.PathLocks, routeList, RoleAdmin, (*Server).handleList, nil},
		{http.MethodPost, wire.PathForceRelease, routeForceRelease, RoleAdmin, (*Server).handleForceRelease, nil},
		{http.MethodGet, wire.PathGuarantees, routeGuarantees, RoleClient, (*Server).handleGuarantees, nil},
		{http.MethodGet, wire.PathMux, routeMux, RoleClient, (*Server).handleMux, nil},
		{http.MethodGet, wire.PathHealth, routeHealth, 0, (*Server).handleHealth, nil},
		{http.MethodGet, wire.PathMetrics, routeOther, 0, (*Server).handleMetrics, nil},
	}
}

// New returns a server over cfg.Backend.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, b: cfg.Backend, creds: newCredentials(cfg.Tokens), log: cfg.Logger,
		routes: make(map[string]*route)}
	st, _ := cfg.Backend.(*store.Store)
	if st != nil {
		s.eng = storeEngine{st}
	} else {
		s.eng = newBackendEngine(cfg.Backend)
	}
	s.m = newMetrics(cfg.Registry, st)
	s.metrics = promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{})
	s.guar = servedGuarantees(cfg.Backend)
	s.closing, s.close = context.WithCancel(context.Background())
	for _, rt := range routeTable() {
		s.routes[rt.path] = rt
	}
	s.bufs.New = func() any { b := make([]byte, 0, 512); return &b }
	return s, nil
}

// servedGuarantees is what clients of the server get: the backend's
// promises, reachable from many hosts, woken by long-poll.
func servedGuarantees(b sema.Backend) sema.Guarantees {
	var g sema.Guarantees
	if d, ok := b.(sema.Declarer); ok {
		g = d.Guarantees()
	}
	if _, ok := b.(sema.Blocker); !ok {
		g.FIFO = false // the server polls such a backend for its waiters
	}
	notes := "served over HTTP by sema serve; waiters are answered by long-poll"
	if g.Notes != "" {
		notes += "; backend: " + g.Notes
	}
	g.Scope, g.Wakeup, g.Notes = sema.ScopeCluster, "long-poll", notes
	return g
}

// Guarantees returns what the server promises its clients.
func (s *Server) Guarantees() sema.Guarantees { return s.guar }

// Close starts a shutdown: every waiting acquire is answered with the code
// "closed" and new acquires are refused, while renewals and releases keep
// working until the backend is closed. Register it with
// http.Server.RegisterOnShutdown.
func (s *Server) Close() {
	s.closed.Store(true)
	s.close()
	s.closeIdle()
}

// Shutdown closes the server (Close) and waits until the connections it
// has taken over from the http.Server have answered their last request
// and closed, or ctx ends (they are then closed). Call it after
// http.Server.Shutdown, which does not know them, and before closing the
// backend.
func (s *Server) Shutdown(ctx context.Context) error {
	s.Close()
	done := make(chan struct{})
	go func() { s.connWG.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	s.connMu.Lock()
	for c := range s.conns {
		c.kill()
	}
	s.connMu.Unlock()
	return context.Cause(ctx)
}

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt := s.routes[r.URL.Path]
	if rt == nil && strings.HasPrefix(r.URL.Path, wire.PathLock) {
		rt = s.routes[wire.PathLock+"{name}"]
	}
	if rt == nil {
		s.fail(w, routeOther, fmt.Errorf("%w: %s", errNotFound, r.URL.Path), anonymousAdmin, false)
		return
	}
	if r.Method != rt.method && !(rt.method == http.MethodGet && r.Method == http.MethodHead) {
		w.Header().Set("Allow", rt.method)
		s.fail(w, rt.label, fmt.Errorf("%w: %s %s", errMethod, r.Method, r.URL.Path), anonymousAdmin, false)
		return
	}
	who := anonymousAdmin
	if rt.role != 0 {
		var ok bool
		if who, ok = s.creds.authenticate(r); !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sema"`)
			s.fail(w, rt.label, errUnauthorized, caller{}, false)
			return
		}
		if rt.role == RoleAdmin && who.role != RoleAdmin {
			s.fail(w, rt.label, fmt.Errorf("%w: %s needs an admin token", errForbidden, rt.path), who, false)
			return
		}
	}
	if rt.hot == nil {
		rt.h(s, w, r, who)
		return
	}
	if s.serveHot(rt.hot, w, r, who) {
		s.takeOver(w, r)
	}
}
