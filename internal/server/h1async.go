package server

import (
	"context"
	"sync"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/store"
)

// asyncPoll is a long poll on a taken-over connection to the embedded
// store, run without a goroutine of its own: the store queues it
// (store.AcquireAsync) and the goroutine that grants it writes the answer
// (granted), a timer writes the heartbeats and ends the wait (tick), the
// connection's goroutine reports a hang-up (clientGone) and the server's
// shutdown ends it too. Whichever path dequeues it (Wait.Cancel) answers;
// once it is granted, only granted answers.
type asyncPoll struct {
	s     *Server
	c     *h1conn
	req   sema.Request
	who   caller
	close bool
	p     *h1poll
	hp    h1poll  // what p points to (one allocation with the poll)
	rep   h1reply // the answer's replier (see reply)

	ctx    context.Context // ends when the client hangs up
	cancel context.CancelCauseFunc
	wt     *store.Wait
	ready  chan struct{} // closed once wt is set

	mu        sync.Mutex // guards the heartbeat state
	timer     *time.Timer
	interval  time.Duration
	deadline  time.Time
	committed bool
	stopped   bool
}

// startAsync starts a long poll of req on rep's connection, if the server
// serves the embedded store (handled; else the caller runs a blocking
// poll). ok: the poll runs, or was answered at once.
func (s *Server) startAsync(rep *h1reply, req sema.Request, wait time.Duration, who caller) (handled, ok bool) {
	se, isStore := s.eng.(storeEngine)
	if !isStore {
		return false, false
	}
	c := rep.c
	ctx, cancel := context.WithCancelCause(context.Background())
	a := &asyncPoll{s: s, c: c, req: req, who: who, close: rep.close, ctx: ctx, cancel: cancel,
		ready: make(chan struct{}), interval: s.cfg.Heartbeat, deadline: time.Now().Add(wait)}
	a.hp = h1poll{cancel: a.clientGone, done: make(chan struct{}), close: rep.close}
	a.p, a.rep = &a.hp, h1reply{c: c, close: rep.close, ctx: ctx}
	s.m.longPolling.Inc()
	g, wt, err := se.s.AcquireAsync(ctx, req, who.Caller, a.granted)
	if wt == nil {
		// Granted at once (the name freed meanwhile) or refused.
		rep2 := &h1reply{c: c, close: rep.close}
		if err != nil {
			a.p.ok = s.failTo(rep2, routeAcquire, err, who, false)
		} else {
			a.p.ok = s.deliver(rep2, routeAcquire, g, req.TTL, false)
		}
		s.m.longPolling.Dec()
		cancel(nil)
		return true, a.p.ok
	}
	a.wt = wt
	c.poll = a.p
	a.mu.Lock()
	a.timer = time.AfterFunc(min(a.interval, wait), a.tick)
	a.mu.Unlock()
	// A shutdown ends the poll: Close (closeIdle) finds it on the
	// connection, or, if it ran before, it is seen closed below. Set
	// before ready: the poll's end (backToIdle) clears it, and waits for
	// ready.
	c.mu.Lock()
	c.apoll = a
	c.mu.Unlock()
	close(a.ready)
	if s.closed.Load() {
		go a.end(errShuttingDown)
	}
	return true, true
}

// stop ends the heartbeats and reports whether a 200 is committed.
func (a *asyncPoll) stop() bool {
	<-a.ready
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stopped = true
	a.timer.Stop()
	return a.committed
}

func (a *asyncPoll) reply() *h1reply { return &a.rep }

// granted is the store's notification: the poll was granted (or the store
// closed). It runs on the goroutine that granted it.
func (a *asyncPoll) granted(wt *store.Wait) {
	g, err := wt.Result()
	if err != nil {
		a.finish(a.s.failTo(a.reply(), routeAcquire, err, a.who, a.stop()))
		return
	}
	if wt.Early() {
		a.finish(a.s.deliver(a.reply(), routeAcquire, g, a.req.TTL, a.stop()))
		return
	}
	go func() {
		// Not on the granter's goroutine: this waits for an fsync.
		if err := wt.Durable(a.ctx); err != nil {
			committed := a.stop()
			if a.ctx.Err() != nil {
				a.s.m.request(routeAcquire, codeGone)
				a.finish(false)
				return
			}
			a.finish(a.s.failTo(a.reply(), routeAcquire, err, a.who, committed))
			return
		}
		a.finish(a.s.deliver(a.reply(), routeAcquire, g, a.req.TTL, a.stop()))
	}()
}

// tick writes a heartbeat, or ends the wait at its deadline.
func (a *asyncPoll) tick() {
	a.mu.Lock()
	if a.stopped {
		a.mu.Unlock()
		return
	}
	left := time.Until(a.deadline)
	if left <= 0 {
		a.mu.Unlock()
		a.end(errWaitOver)
		return
	}
	first := !a.committed
	a.committed = true
	if a.reply().beat(first) == nil {
		a.timer.Reset(min(a.interval, left))
	}
	a.mu.Unlock()
}

// end dequeues the poll (its wait ran out, or the server is closing) and
// answers why, unless it was granted meanwhile.
func (a *asyncPoll) end(cause error) {
	<-a.ready
	if !a.wt.Cancel() {
		return // granted answers
	}
	committed := a.stop()
	err := cause
	if cause == errWaitOver {
		err = a.s.waitOverError(a.req)
	}
	a.finish(a.s.failTo(a.reply(), routeAcquire, err, a.who, committed))
}

// clientGone is the connection's report of a hang-up: the poll is
// dequeued, or its grant (being written) is given back by deliver.
func (a *asyncPoll) clientGone(cause error) {
	a.cancel(cause)
	<-a.ready
	if a.wt.Cancel() {
		a.stop()
		a.s.m.request(routeAcquire, codeGone)
		a.finish(false)
	}
}

// finish ends the poll: the connection waits for its next request again.
func (a *asyncPoll) finish(ok bool) {
	a.s.m.longPolling.Dec()
	a.cancel(nil)
	a.p.ok = ok
	a.c.backToIdle()
	close(a.p.done)
}
