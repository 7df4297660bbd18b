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
	"github.com/sema-dev/sema/internal/wire"
)

// Server serves the sema HTTP/JSON API v1 over a backend. It is an
// http.Handler; the caller owns the http.Server, the listener and the
// backend.
type Server struct {
	cfg     Config
	eng     engine
	creds   credentials
	m       *metrics
	log     *slog.Logger
	metrics http.Handler
	routes  map[string]*route
	limits  *limits
	leases  *ledger

	closed atomic.Bool

	connMu sync.Mutex
	conns  map[*muxConn]struct{} // sema-mux connections (hijacked: http.Server does not know them)
	connWG sync.WaitGroup
}

// route is one endpoint. role 0 means no authentication.
type route struct {
	method, path, label string
	role                Role
	h                   func(s *Server, w http.ResponseWriter, r *http.Request, who caller)
}

// routeTable lists every endpoint; api/openapi.yaml documents the same.
func routeTable() []*route {
	return []*route{
		{http.MethodPost, wire.PathAcquire, routeAcquire, RoleClient, (*Server).handleAcquire},
		{http.MethodPost, wire.PathRenew, routeRenew, RoleClient, (*Server).handleRenew},
		{http.MethodPost, wire.PathRelease, routeRelease, RoleClient, (*Server).handleRelease},
		{http.MethodGet, wire.PathLock + "{name}", routeDescribe, RoleClient, (*Server).handleDescribe},
		{http.MethodGet, wire.PathLocks, routeList, RoleAdmin, (*Server).handleList},
		{http.MethodPost, wire.PathForceRelease, routeForceRelease, RoleAdmin, (*Server).handleForceRelease},
		{http.MethodGet, wire.PathGuarantees, routeGuarantees, RoleClient, (*Server).handleGuarantees},
		{http.MethodGet, wire.PathMux, routeMux, RoleClient, (*Server).handleMux},
		{http.MethodGet, wire.PathHealth, routeHealth, 0, (*Server).handleHealth},
		{http.MethodGet, wire.PathMetrics, routeOther, 0, (*Server).handleMetrics},
	}
}

// New returns a server over cfg.Backend.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, eng: newEngine(cfg.Backend), creds: newCredentials(cfg.Tokens), log: cfg.Logger,
		routes: make(map[string]*route), limits: newLimits(&cfg), leases: newLedger()}
	if fn, ok := cfg.Backend.(sema.ForceNotifier); ok {
		fn.NotifyForced(s.heardForced) // for as long as the backend lives
	}
	st, _ := cfg.Backend.(storeStats)
	s.m = newMetrics(cfg.Registry, st)
	s.metrics = promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{})
	for _, rt := range routeTable() {
		s.routes[rt.path] = rt
	}
	return s, nil
}

// Guarantees returns what the server promises its clients.
func (s *Server) Guarantees() sema.Guarantees { return s.eng.guarantees() }

// Close starts a shutdown: every waiting acquire is answered with the code
// "closed" and new acquires are refused, while renewals and releases keep
// working until the backend is closed; sema-mux connections close once
// their calls are answered. Register it with
// http.Server.RegisterOnShutdown.
func (s *Server) Close() {
	s.closed.Store(true)
	for _, p := range s.limits.close() {
		p.stop(errShuttingDown)
	}
	s.connMu.Lock()
	defer s.connMu.Unlock()
	for c := range s.conns {
		c.shutdown()
	}
}

// Shutdown closes the server (Close) and waits until its sema-mux
// connections have answered their last call and closed, or ctx ends (they
// are then closed). Call it after http.Server.Shutdown, which does not
// know them, and before closing the backend.
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
		c.nc.Close()
	}
	s.connMu.Unlock()
	<-done
	return context.Cause(ctx)
}

// track adds a sema-mux connection, unless the server is closing.
func (s *Server) track(c *muxConn) bool {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if s.closed.Load() {
		return false
	}
	if s.conns == nil {
		s.conns = make(map[*muxConn]struct{})
	}
	s.conns[c] = struct{}{}
	s.connWG.Add(1)
	return true
}

func (s *Server) untrack(c *muxConn) {
	s.connMu.Lock()
	delete(s.conns, c)
	s.connMu.Unlock()
	s.connWG.Done()
}

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt := s.routes[r.URL.Path]
	if rt == nil && strings.HasPrefix(r.URL.Path, wire.PathLock) {
		rt = s.routes[wire.PathLock+"{name}"]
	}
	if rt == nil {
		s.fail(w, routeOther, fmt.Errorf("%w: %s", errNotFound, r.URL.Path), anonymousAdmin)
		return
	}
	if r.Method != rt.method && !(rt.method == http.MethodGet && r.Method == http.MethodHead) {
		w.Header().Set("Allow", rt.method)
		s.fail(w, rt.label, fmt.Errorf("%w: %s %s", errMethod, r.Method, r.URL.Path), anonymousAdmin)
		return
	}
	who := anonymousAdmin
	if rt.role != 0 {
		var ok bool
		if who, ok = s.creds.authenticate(r); !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sema"`)
			s.fail(w, rt.label, errUnauthorized, caller{})
			return
		}
		if rt.role == RoleAdmin && who.role != RoleAdmin {
			s.fail(w, rt.label, fmt.Errorf("%w: %s needs an admin token", errForbidden, rt.path), who)
			return
		}
	}
	who.key = limitKey(who, r)
	rt.h(s, w, r, who)
}
