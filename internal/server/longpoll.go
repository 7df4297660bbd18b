package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sema-dev/sema"
)

// errWaitOver is the cause of a long-poll whose wait_ms ran out.
var errWaitOver = errors.New("wait_ms elapsed")

// longPoll waits in the backend's queue for up to wait. If no outcome is
// known after one heartbeat interval, it commits 200 and writes a space
// every interval; the final body is an envelope either way. A client that
// hangs up is dequeued (rep.gone ends); a grant it can no longer receive
// is given back. It reports whether an answer went out.
func (s *Server) longPoll(rep replier, req sema.Request, wait time.Duration, who caller) bool {
	// The connection's read and write timeouts are for ordinary requests;
	// this one may legitimately last up to wait.
	rep.extend(time.Now().Add(wait + s.cfg.Heartbeat + 30*time.Second))
	if hr, ok := rep.(*h1reply); ok {
		if handled, ok := s.startAsync(hr, req, wait, who); handled {
			return ok
		}
	}
	return rep.await(func(rep replier) bool { return s.waitGrant(rep, req, wait, who) })
}

// waitGrant is the wait of a long poll, answered through rep.
func (s *Server) waitGrant(rep replier, req sema.Request, wait time.Duration, who caller) bool {
	s.m.longPolling.Inc()
	defer s.m.longPolling.Dec()
	gone := rep.gone()
	ctx, cancel := context.WithCancelCause(gone)
	defer cancel(nil)
	stop := context.AfterFunc(s.closing, func() { cancel(errShuttingDown) })
	defer stop()

	// One timer serves both the heartbeats and the end of wait.
	hb := startHeartbeat(rep, s.cfg.Heartbeat, wait, cancel)
	g, err := s.eng.acquire(ctx, req, who.Caller, true)
	committed := hb.stop()
	if err == nil {
		return s.deliver(rep, routeAcquire, g, req.TTL, committed)
	}
	if gone.Err() != nil {
		s.m.request(routeAcquire, codeGone)
		return false
	}
	switch context.Cause(ctx) {
	case errWaitOver:
		err = s.heldError(ctx, req.Name, err)
	case errShuttingDown:
		err = errShuttingDown
	}
	return s.failTo(rep, routeAcquire, err, who, committed)
}

// waitOverError is the answer of an async long poll whose wait ran out:
// who holds req's name.
func (s *Server) waitOverError(req sema.Request) error {
	return s.heldError(context.Background(), req.Name, &sema.HeldError{Name: req.Name, Limit: req.Limit})
}

// heldError describes who holds name, for a wait that ran out.
func (s *Server) heldError(ctx context.Context, name string, err error) error {
	in, ok := s.b.(sema.Inspector)
	if !ok {
		return err
	}
	st, derr := in.Describe(context.WithoutCancel(ctx), name)
	if derr != nil {
		return err
	}
	return &sema.HeldError{Name: name, Limit: st.Limit, Holders: st.Holders, Waiters: len(st.Waiters)}
}

// heartbeat writes a space every interval once the first interval has
// passed, so that clients and proxies see a live connection, and ends the
// wait (cancel with errWaitOver) at its deadline: one timer for both.
type heartbeat struct {
	mu        sync.Mutex
	rep       replier
	timer     *time.Timer
	interval  time.Duration
	deadline  time.Time
	cancel    context.CancelCauseFunc
	committed bool
	stopped   bool
}

func startHeartbeat(rep replier, interval, wait time.Duration, cancel context.CancelCauseFunc) *heartbeat {
	h := &heartbeat{rep: rep, interval: interval, deadline: time.Now().Add(wait), cancel: cancel}
	h.mu.Lock()
	h.timer = time.AfterFunc(min(interval, wait), h.tick)
	h.mu.Unlock()
	return h
}

func (h *heartbeat) tick() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	left := time.Until(h.deadline)
	if left <= 0 {
		h.cancel(errWaitOver)
		return
	}
	first := !h.committed
	h.committed = true
	if h.rep.beat(first) != nil {
		return // the client is gone: its context ends the wait
	}
	h.timer.Reset(min(h.interval, left))
}

// stop ends the heartbeats (waiting for one in progress) and reports
// whether the status line was committed.
func (h *heartbeat) stop() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	h.timer.Stop()
	return h.committed
}
