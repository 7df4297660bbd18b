package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/wire"
)

// The routes other than the calls every lock takes: inspection,
// force-release, guarantees, health and metrics.

func (s *Server) handleDescribe(w http.ResponseWriter, r *http.Request, who caller) {
	// r.URL.Path is unescaped: a name sent as jobs%2Fnightly is jobs/nightly.
	name := strings.TrimPrefix(r.URL.Path, wire.PathLock)
	if err := sema.ValidateName(name); err != nil {
		s.fail(w, routeDescribe, err, who)
		return
	}
	st, err := s.eng.describe(r.Context(), name)
	if err != nil {
		s.fail(w, routeDescribe, err, who)
		return
	}
	s.ok(w, routeDescribe, redactStatus(st, who.Admin))
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request, who caller) {
	prefix := r.URL.Query().Get("prefix")
	if len(prefix) > sema.MaxNameLen {
		s.fail(w, routeList, fmt.Errorf("%w: prefix longer than %d bytes", sema.ErrInvalidName, sema.MaxNameLen), who)
		return
	}
	all, err := s.eng.list(r.Context(), prefix)
	if err != nil {
		s.fail(w, routeList, err, who)
		return
	}
	for i := range all {
		all[i] = redactStatus(all[i], who.Admin)
	}
	if all == nil {
		all = []sema.Status{}
	}
	s.ok(w, routeList, wire.ListResponse{Locks: all})
}

func (s *Server) handleForceRelease(w http.ResponseWriter, r *http.Request, who caller) {
	bp := getBuf()
	b, err := readBody(w, r, (*bp)[:0])
	var in wire.ForceReleaseRequest
	if err == nil {
		in, err = decodeForceRelease(b)
	}
	putBuf(bp, b)
	if err != nil {
		s.fail(w, routeForceRelease, err, who)
		return
	}
	// The holders a backend tells hear the name the caller gives itself,
	// if any, and who it is as the server knows it (its token, or its
	// address).
	by := in.By
	if by == "" {
		by = "sema serve"
	}
	if l := who.label(); l != "" {
		by += " (" + l + ")"
	}
	hs, err := s.eng.forceRelease(context.WithoutCancel(r.Context()), in.Name, in.ID, sema.ForceOptions{Now: in.Now, By: by})
	for _, h := range hs {
		s.log.Warn("sema serve: force-release", "name", in.Name, "lease", h.ID, "owner", h.Owner,
			"token", h.Token, "now", in.Now, "expires", h.ExpiresAt, "by", who.Principal, "remote", r.RemoteAddr)
	}
	if err != nil {
		s.fail(w, routeForceRelease, err, who)
		return
	}
	s.m.forced.Add(float64(len(hs)))
	s.ok(w, routeForceRelease, wire.ForceReleaseResponse{Released: hs})
}

func (s *Server) handleGuarantees(w http.ResponseWriter, _ *http.Request, _ caller) {
	s.ok(w, routeGuarantees, s.eng.guarantees())
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request, _ caller) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if s.closed.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("closing\n"))
		s.m.request(routeHealth, wire.CodeClosed)
		return
	}
	if err := s.eng.failing(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("store failing: " + err.Error() + "\n"))
		s.m.request(routeHealth, wire.CodeUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
	s.m.request(routeHealth, "ok")
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request, _ caller) {
	s.metrics.ServeHTTP(w, r)
}
