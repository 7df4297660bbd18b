package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sema-dev/sema"
)

// The one way the server waits.
//
// An acquire, whether it came as an HTTP long poll or as a sema-mux call,
// is a poll: the engine's asynchronous acquire (engine.acquire), plus what
// may end the wait first — its wait_ms running out (a timer), the client
// hanging up or cancelling, the server shutting down. Whichever comes
// first decides; the poll is answered exactly once, through its done
// function, without a goroutine of its own while it waits.

// Causes that end a wait before the engine answers.
var (
	errWaitOver     = errors.New("wait_ms elapsed")
	errClientGone   = errors.New("the client hung up")
	errMuxCancelled = errors.New("cancelled by the client")
	errShuttingDown = fmt.Errorf("server: shutting down: %w", sema.ErrClosed)
)

// poll is one acquire in the engine on behalf of a client.
type poll struct {
	s    *Server
	req  sema.Request
	wait time.Duration // 0: a try
	key  string        // the limits key of a waiting acquire; "" for a try
	done func(*poll, sema.Grant, error)

	mu      sync.Mutex
	cancel  func() bool // withdraws the request; nil until the engine has it
	timer   *time.Timer // ends the wait at its wait_ms
	stopped error       // why the client's wait ended, if it did before the answer
	over    bool        // answered
}

// startPoll acquires req for who, waiting up to wait (0: a try), and
// answers through done exactly once: a grant (durable), or why not. An
// error means the acquire was refused at once (a bound on waiters, the
// server closing); done is then never called.
func (s *Server) startPoll(req sema.Request, who caller, wait time.Duration, done func(*poll, sema.Grant, error)) (*poll, error) {
	p := &poll{s: s, req: req, wait: wait, done: done}
	if s.closed.Load() {
		return nil, errShuttingDown
	}
	if wait > 0 {
		if err := s.limits.addWaiter(who.key, p); err != nil {
			return nil, err
		}
		p.key = who.key
		s.m.longPolling.Inc()
	}
	cancel := s.eng.acquire(req, who.Caller, wait > 0, p.finish)
	p.mu.Lock()
	if p.over {
		p.mu.Unlock()
		return p, nil
	}
	p.cancel = cancel
	if wait > 0 {
		p.timer = time.AfterFunc(wait, p.expire)
	}
	stopped := p.stopped != nil
	p.mu.Unlock()
	if stopped { // a stop came while the engine took the request
		p.withdraw()
	}
	return p, nil
}

// finish is the engine's answer (or withdraw's): the poll is over.
func (p *poll) finish(g sema.Grant, err error) {
	p.mu.Lock()
	if p.over {
		p.mu.Unlock()
		return
	}
	p.over = true
	if p.timer != nil {
		p.timer.Stop()
	}
	why := p.stopped
	p.mu.Unlock()
	if p.key != "" {
		p.s.limits.doneWaiter(p.key, p)
		p.s.m.longPolling.Dec()
	}
	if err != nil && why != nil {
		err = p.s.stopError(p.req, why)
	}
	p.done(p, g, err)
}

func (p *poll) expire() { p.stop(errWaitOver) }

// stop ends the wait for why, unless the poll is answered already. A
// grant that comes anyway is still answered (the transport gives it back
// if the client is gone).
func (p *poll) stop(why error) {
	p.mu.Lock()
	if p.over || p.stopped != nil {
		p.mu.Unlock()
		return
	}
	p.stopped = why
	started := p.cancel != nil
	p.mu.Unlock()
	if started {
		p.withdraw()
	}
}

// withdraw takes the request back from the engine; if it was still
// queued, the poll answers why it stopped.
func (p *poll) withdraw() {
	if p.cancel() {
		p.finish(sema.Grant{}, errWithdrawn)
	}
}

// errWithdrawn is finish's error for a withdrawn request: stopError
// replaces it.
var errWithdrawn = errors.New("withdrawn")

// stopError is the answer to a poll that stopped for why: the holders of
// the name if its wait ran out, else why.
func (s *Server) stopError(req sema.Request, why error) error {
	if why != errWaitOver {
		return why
	}
	held := &sema.HeldError{Name: req.Name, Limit: req.Limit}
	if st, err := s.eng.describe(context.Background(), req.Name); err == nil {
		held.Limit, held.Holders, held.Waiters = st.Limit, st.Holders, len(st.Waiters)
	}
	return held
}

// giveBack releases a grant nobody received, on its own bounded context.
func (s *Server) giveBack(g sema.Grant) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.eng.release(ctx, g.Name, g.ID, anonymousAdmin.Caller)
	if err != nil && !errors.Is(err, sema.ErrNotHeld) && !errors.Is(err, sema.ErrClosed) {
		s.log.Warn("sema serve: giving back an undelivered grant failed", "name", g.Name, "err", err)
	}
}
