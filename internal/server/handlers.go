package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/store"
	"github.com/sema-dev/sema/internal/wire"
)

func body(w http.ResponseWriter, r *http.Request) io.Reader {
	return http.MaxBytesReader(w, r.Body, wire.MaxBodyBytes)
}

var errShuttingDown = fmt.Errorf("server: shutting down: %w", sema.ErrClosed)

// hotHandler serves a hot route from its body, read whole (rerr: how
// reading it failed, if it did), answering through rep.
type hotHandler func(s *Server, rep replier, b []byte, rerr error, who caller) bool

// serveHot reads r's body and runs h on it through net/http. It reports
// whether the answer went out whole and the body was read to its end (the
// connection may then be taken over, h1conn.go).
func (s *Server) serveHot(h hotHandler, w http.ResponseWriter, r *http.Request, who caller) bool {
	bp := bodyBufs.Get().(*[]byte)
	defer putBodyBuf(bp)
	b, rerr := readAllInto((*bp)[:0], body(w, r))
	*bp = b
	return h(s, httpReplier{w, r}, b, rerr, who) && rerr == nil
}

// hotAcquire serves POST /v1/acquire. It reports whether it answered.
func (s *Server) hotAcquire(rep replier, b []byte, rerr error, who caller) bool {
	req, wait, err := decodeAcquireBody(b, rerr, s.cfg.MaxWait)
	if err != nil {
		return s.failTo(rep, routeAcquire, err, who, false)
	}
	if s.closed.Load() {
		return s.failTo(rep, routeAcquire, errShuttingDown, who, false)
	}
	ctx := rep.gone()
	var g sema.Grant
	if wait > 0 {
		// The long-poll machinery (deadlines, contexts, heartbeat timer)
		// is set up only for a request that must wait.
		var done bool
		if g, done, err = s.eng.acquireNow(ctx, req, who.Caller); !done {
			return s.longPoll(rep, req, wait, who)
		}
	} else {
		g, err = s.eng.acquire(ctx, req, who.Caller, false)
	}
	if err != nil {
		if ctx.Err() != nil {
			s.m.request(routeAcquire, codeGone)
			return false
		}
		return s.failTo(rep, routeAcquire, err, who, false)
	}
	return s.deliver(rep, routeAcquire, g, req.TTL, false)
}

// hotRenew serves POST /v1/renew.
func (s *Server) hotRenew(rep replier, b []byte, rerr error, who caller) bool {
	in, ttl, err := decodeRenewBody(b, rerr)
	if err != nil {
		return s.failTo(rep, routeRenew, err, who, false)
	}
	g, err := s.eng.renew(rep.gone(), in.Name, in.ID, ttl, who.Caller)
	if err != nil {
		e, _ := toWire(err, false)
		if e.Code == wire.CodeLeaseLost {
			s.m.losses.WithLabelValues(e.Reason).Inc()
		}
		return s.failTo(rep, routeRenew, err, who, false)
	}
	return s.deliver(rep, routeRenew, g, ttl, false)
}

var releasedBody = []byte("{}\n")

// hotRelease serves POST /v1/release.
func (s *Server) hotRelease(rep replier, b []byte, rerr error, who caller) bool {
	in, err := decodeReleaseBody(b, rerr)
	if err != nil {
		return s.failTo(rep, routeRelease, err, who, false)
	}
	// A release completes even if the client hangs up meanwhile.
	ctx := rep.gone()
	if ctx != context.Background() {
		ctx = context.WithoutCancel(ctx)
	}
	if err := s.eng.release(ctx, in.Name, in.ID, who.Caller); err != nil {
		return s.failTo(rep, routeRelease, err, who, false)
	}
	if rep.send(http.StatusOK, releasedBody, false) != nil {
		s.m.request(routeRelease, codeGone)
		return false
	}
	s.m.request(routeRelease, "ok")
	return true
}

func (s *Server) inspector(w http.ResponseWriter, route string, who caller) sema.Inspector {
	in, ok := s.b.(sema.Inspector)
	if !ok {
		s.fail(w, route, fmt.Errorf("%w: the backend cannot describe its locks", sema.ErrInvalidArgument), who, false)
	}
	return in
}

func (s *Server) handleDescribe(w http.ResponseWriter, r *http.Request, who caller) {
	// r.URL.Path is unescaped: a name sent as jobs%2Fnightly is jobs/nightly.
	name := strings.TrimPrefix(r.URL.Path, wire.PathLock)
	if err := sema.ValidateName(name); err != nil {
		s.fail(w, routeDescribe, err, who, false)
		return
	}
	in := s.inspector(w, routeDescribe, who)
	if in == nil {
		return
	}
	st, err := in.Describe(r.Context(), name)
	if err != nil {
		s.fail(w, routeDescribe, err, who, false)
		return
	}
	s.ok(w, routeDescribe, redactStatus(st, who.Admin))
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request, who caller) {
	prefix := r.URL.Query().Get("prefix")
	if len(prefix) > sema.MaxNameLen {
		s.fail(w, routeList, fmt.Errorf("%w: prefix longer than %d bytes", sema.ErrInvalidName, sema.MaxNameLen), who, false)
		return
	}
	in := s.inspector(w, routeList, who)
	if in == nil {
		return
	}
	all, err := in.List(r.Context(), prefix)
	if err != nil {
		s.fail(w, routeList, err, who, false)
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
	in, err := decodeForceRelease(body(w, r))
	if err != nil {
		s.fail(w, routeForceRelease, err, who, false)
		return
	}
	fr, ok := s.b.(sema.ForceReleaser)
	if !ok {
		s.fail(w, routeForceRelease, fmt.Errorf("%w: the backend cannot force-release", sema.ErrInvalidArgument), who, false)
		return
	}
	hs, err := fr.ForceRelease(context.WithoutCancel(r.Context()), in.Name, in.ID)
	for _, h := range hs {
		s.log.Warn("sema serve: force-release", "name", in.Name, "lease", h.ID, "owner", h.Owner,
			"token", h.Token, "by", who.Principal, "remote", r.RemoteAddr)
	}
	if err != nil {
		s.fail(w, routeForceRelease, err, who, false)
		return
	}
	s.m.forced.Add(float64(len(hs)))
	s.ok(w, routeForceRelease, wire.ForceReleaseResponse{Released: hs})
}

func (s *Server) handleGuarantees(w http.ResponseWriter, _ *http.Request, _ caller) {
	s.ok(w, routeGuarantees, s.guar)
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request, _ caller) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if s.closed.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("closing\n"))
		s.m.request(routeHealth, wire.CodeClosed)
		return
	}
	if st, ok := s.b.(*store.Store); ok && st.Err() != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("store failing: " + st.Err().Error() + "\n"))
		s.m.request(routeHealth, wire.CodeUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
	s.m.request(routeHealth, "ok")
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request, _ caller) {
	s.metrics.ServeHTTP(w, r)
}
