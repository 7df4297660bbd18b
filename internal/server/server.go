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
	rt.h(s, w, r, who)
}
