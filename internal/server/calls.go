package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/wire"
)

// The calls every lock takes — acquire, renew, release — are served here
// once, for both transports: HTTP (http.go) and sema-mux (mux.go) only
// read the body, and write the answer where it belongs.

// answer is the reply to one call: its HTTP status, its JSON body (an
// Envelope, or {} for a release) and the result code that
// sema_http_requests_total counts.
type answer struct {
	status int
	body   []byte
	code   string
}

// bufs holds buffers for answers.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func getBuf() *[]byte { return bufs.Get().(*[]byte) }

func putBuf(bp *[]byte, b []byte) {
	if cap(b) <= 4096 {
		*bp = b[:0]
		bufs.Put(bp)
	}
}

// acquire starts the acquire call in body for who; its answer goes to done
// (exactly once), unless it is refused at once (err).
func (s *Server) acquire(body []byte, who caller, done func(*poll, sema.Grant, error)) (*poll, error) {
	req, wait, err := decodeAcquire(body, s.cfg.MaxWait)
	if err != nil {
		return nil, err
	}
	if req.Owner == "" {
		req.Owner = who.label()
	}
	if s.leases.givenUp(who.Principal, req.Name, req.ID) {
		// A client that gave up a wait releases its lease ID; over
		// HTTP/1.1 that release can overtake the acquire it gives up, which
		// must then not be granted to nobody. The refusal is final (not
		// "not acquired", which a client polls again after): the ID is
		// spent.
		return nil, fmt.Errorf("%w: lease %s of %q was released by this client; an acquire needs a new lease id",
			sema.ErrInvalidArgument, req.ID, req.Name)
	}
	return s.startPoll(req, who, wait, done)
}

// renew serves a renew call, appending its answer's body to dst.
func (s *Server) renew(ctx context.Context, dst, body []byte, who caller) answer {
	in, ttl, err := decodeRenew(body)
	if err != nil {
		return s.refused(dst, routeRenew, err, who)
	}
	g, err := s.eng.renew(ctx, in.Name, in.ID, ttl, who.Caller)
	if err != nil {
		if errors.Is(err, sema.ErrLeaseLost) && !errors.Is(err, sema.ErrForceReleased) {
			// The engines cannot tell an expired lease from an ID they
			// never saw; the ledger can, for the leases of this caller.
			if known, released := s.leases.lookup(who.Principal, in.Name, in.ID); !known || released {
				err = fmt.Errorf("%w: %q has no lease %s for this client (never granted, or released)", sema.ErrNotHeld, in.Name, in.ID)
			}
		}
		a := s.refused(dst, routeRenew, err, who)
		if a.code == wire.CodeLeaseLost {
			e, _ := toWire(err, false)
			s.m.losses.WithLabelValues(e.Reason).Inc()
			s.leases.forget(who.Principal, in.Name, in.ID)
		}
		return a
	}
	s.leases.held(who.Principal, g.Name, g.ID, g.ExpiresAt)
	return granted(dst, g, ttl)
}

var (
	releasedBody        = []byte("{}\n")
	releasedAlreadyBody = []byte(`{"already_released":true}` + "\n")
)

// release serves a release call. It completes even if the client hangs up
// meanwhile. A release of a lease this caller released moments ago
// succeeds again (idempotent), saying so.
func (s *Server) release(ctx context.Context, dst, body []byte, who caller) answer {
	in, err := decodeRelease(body)
	if err != nil {
		return s.refused(dst, routeRelease, err, who)
	}
	if err := s.eng.release(context.WithoutCancel(ctx), in.Name, in.ID, who.Caller); err != nil {
		known, released := s.leases.lookup(who.Principal, in.Name, in.ID)
		if released && errors.Is(err, sema.ErrNotHeld) {
			return answer{http.StatusOK, append(dst, releasedAlreadyBody...), "ok"}
		}
		if !known && errors.Is(err, sema.ErrNotHeld) {
			s.leases.unknownReleased(who.Principal, in.Name, in.ID)
		}
		return s.refused(dst, routeRelease, err, who)
	}
	s.leases.released(who.Principal, in.Name, in.ID)
	return answer{http.StatusOK, append(dst, releasedBody...), "ok"}
}

// granted is the answer carrying lease g.
func granted(dst []byte, g sema.Grant, ttl time.Duration) answer {
	l := wire.Lease{
		Name: g.Name, ID: g.ID, Token: g.Token, Owner: g.Owner, Weight: g.Weight, Limit: g.Limit,
		AcquiredAt: g.AcquiredAt, ExpiresAt: g.ExpiresAt, TTLMillis: ttl.Milliseconds(),
		WaitedMillis: float64(g.Waited.Microseconds()) / 1000,
	}
	return answer{http.StatusOK, wire.AppendLease(dst, &l), "ok"}
}

// refused is the error envelope of err. Internal errors are logged.
func (s *Server) refused(dst []byte, route string, err error, who caller) answer {
	e, status := toWire(err, who.Admin)
	if e.Code == wire.CodeInternal {
		s.log.Error("sema serve: internal error", "route", route, "err", err)
	}
	body, merr := json.Marshal(wire.Envelope{Error: e})
	if merr != nil {
		body = []byte(`{"error":{"code":"internal","message":"cannot encode the error"}}`)
	}
	dst = append(dst, body...)
	return answer{status, append(dst, '\n'), e.Code}
}

// outcome is the answer to an acquire, appended to dst. A grant's answer
// also comes back, to be given back if it cannot be delivered.
func (s *Server) outcome(dst []byte, g sema.Grant, err error, ttl time.Duration, who caller) (answer, *sema.Grant) {
	if err != nil {
		return s.refused(dst, routeAcquire, err, who), nil
	}
	s.leases.held(who.Principal, g.Name, g.ID, g.ExpiresAt)
	return granted(dst, g, ttl), &g
}

// gone counts an acquire whose client left before its answer; a grant is
// given back.
func (s *Server) gone(route string, g sema.Grant, err error) {
	if err == nil {
		s.giveBack(g)
	}
	s.m.request(route, codeGone)
}

// delivered counts an answered call: with its code if it went out, as
// client_gone if not (a grant is then given back).
func (s *Server) delivered(route string, a answer, g *sema.Grant, ok bool) {
	if !ok {
		if g != nil {
			s.giveBack(*g)
		}
		s.m.request(route, codeGone)
		return
	}
	s.m.request(route, a.code)
	if g != nil {
		s.m.grants.Inc()
		s.m.wait.Observe(g.Waited.Seconds())
	}
}
