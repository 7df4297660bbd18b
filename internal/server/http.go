package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/wire"
)

// The calls every lock takes, over HTTP: net/http reads the request, the
// handler reads its body whole and serves it (calls.go). A waiting acquire
// is a long poll: after one heartbeat interval without an outcome the
// server commits 200 and writes a space each interval; the final envelope
// follows. A client that hangs up is dequeued (its request context ends);
// a grant that cannot be written is given back.

// readBody reads r's body whole into b, up to wire.MaxBodyBytes.
func readBody(w http.ResponseWriter, r *http.Request, b []byte) ([]byte, error) {
	if r.ContentLength > wire.MaxBodyBytes { // refused unread: the connection closes after the answer
		w.Header().Set("Connection", "close")
		return b, fmt.Errorf("%w: %w", errTooLarge, sema.ErrInvalidArgument)
	}
	body := http.MaxBytesReader(w, r.Body, wire.MaxBodyBytes)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		switch {
		case err == nil:
		case err == io.EOF:
			return b, nil
		case errors.As(err, new(*http.MaxBytesError)):
			return b, fmt.Errorf("%w: %w", errTooLarge, sema.ErrInvalidArgument)
		default:
			return b, fmt.Errorf("%w: %w: reading the body: %w", errBadRequest, sema.ErrInvalidArgument, err)
		}
	}
}

// handleAcquire serves POST /v1/acquire.
func (s *Server) handleAcquire(w http.ResponseWriter, r *http.Request, who caller) {
	bp := getBuf()
	b, err := readBody(w, r, (*bp)[:0])
	res := make(chan result, 1)
	var p *poll
	if err == nil {
		p, err = s.acquire(b, who, func(_ *poll, g sema.Grant, err error) { res <- result{g, err} })
	}
	if err != nil {
		s.reply(w, routeAcquire, s.refused(b[:0], routeAcquire, err, who), nil, false)
		putBuf(bp, b)
		return
	}
	var o result
	committed := false
	if p.wait > 0 {
		o, committed = s.longPoll(w, r, p, res)
	} else {
		o = <-res
	}
	if errors.Is(o.err, errClientGone) || r.Context().Err() != nil {
		s.gone(routeAcquire, o.g, o.err)
		putBuf(bp, b)
		return
	}
	a, g := s.outcome(b[:0], o.g, o.err, p.req.TTL, who)
	s.reply(w, routeAcquire, a, g, committed)
	putBuf(bp, a.body)
}

// result is the engine's answer to an acquire.
type result struct {
	g   sema.Grant
	err error
}

// longPoll waits for res, writing heartbeats, and reports whether the
// status line went out with them. The connection's read and write
// deadlines, set for ordinary requests, are extended to the wait.
func (s *Server) longPoll(w http.ResponseWriter, r *http.Request, p *poll, res <-chan result) (result, bool) {
	rc := http.NewResponseController(w)
	dl := time.Now().Add(p.wait + s.cfg.Heartbeat + 30*time.Second)
	_ = rc.SetReadDeadline(dl)
	_ = rc.SetWriteDeadline(dl)
	beat := time.NewTimer(s.cfg.Heartbeat)
	defer beat.Stop()
	committed := false
	gone := r.Context().Done()
	for {
		select {
		case o := <-res:
			return o, committed
		case <-beat.C:
			if !committed {
				w.Header()["Content-Type"] = jsonType
				w.WriteHeader(http.StatusOK)
				committed = true
			}
			if _, err := w.Write([]byte{' '}); err != nil || rc.Flush() != nil {
				p.stop(errClientGone)
				continue
			}
			beat.Reset(s.cfg.Heartbeat)
		case <-gone:
			gone = nil
			p.stop(errClientGone) // the answer follows at once, or the grant that beat it
		}
	}
}

// handleRenew serves POST /v1/renew.
func (s *Server) handleRenew(w http.ResponseWriter, r *http.Request, who caller) {
	s.serveCall(w, r, who, routeRenew, s.renew)
}

// handleRelease serves POST /v1/release.
func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request, who caller) {
	s.serveCall(w, r, who, routeRelease, s.release)
}

// serveCall serves a call answered at once.
func (s *Server) serveCall(w http.ResponseWriter, r *http.Request, who caller, route string,
	call func(ctx context.Context, dst, body []byte, who caller) answer) {
	bp := getBuf()
	b, err := readBody(w, r, (*bp)[:0])
	var a answer
	if err != nil {
		a = s.refused(b[:0], route, err, who)
	} else {
		a = call(r.Context(), b[len(b):], b, who)
	}
	s.reply(w, route, a, nil, false)
	putBuf(bp, b)
}
