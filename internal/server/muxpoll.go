package server

import (
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/store"
	"github.com/sema-dev/sema/internal/wire"
)

// muxPoll is an acquire of a sema-mux connection on the embedded store:
// a try, or a long poll queued without a goroutine. Whichever ends it
// first answers it: its grant (granted, on the goroutine that granted it
// or made it durable), or stop: its wait running out (a timer), a
// MuxCancel frame, the end of the connection, the server's shutdown.
// There are no heartbeats.
type muxPoll struct {
	m   *muxConn
	rep muxReply
	req sema.Request
	who caller

	// Guarded by m.mu.
	wt      *store.Wait
	timer   *time.Timer
	over    bool  // dequeued: answered or being answered
	stopReq error // a stop that came before wt was set

	polling bool // queued if it must wait (else a try)
}

// acquireStore serves an acquire frame on the embedded store without
// blocking the connection's goroutine: a grant, at once or after a wait in
// the queue, is answered once it is on disk, by the goroutine that made it
// so (store.AcquireDeferred).
func (m *muxConn) acquireStore(se storeEngine, tag uint32, body []byte) {
	s := m.s
	m.rep = muxReply{m: m, tag: tag, ctx: m.ctx}
	req, wait, err := decodeAcquireBody(body, nil, s.cfg.MaxWait)
	if err == nil && s.closed.Load() {
		err = errShuttingDown
	}
	if err != nil {
		s.failTo(&m.rep, routeAcquire, err, m.who, false)
		return
	}
	p := &muxPoll{m: m, rep: m.rep, req: req, who: m.who, polling: wait > 0}
	if p.polling {
		if err := m.addPoll(tag, p); err != nil {
			if m.bad == nil {
				s.failTo(&m.rep, routeAcquire, err, m.who, false)
			}
			return
		}
		s.m.longPolling.Inc()
	} else {
		m.wg.Add(1)
	}
	wt, err := se.s.AcquireDeferred(m.ctx, req, m.who.Caller, p.polling, p.granted)
	if wt == nil {
		p.settle()
		p.finish(s.failTo(&p.rep, routeAcquire, err, m.who, false))
		return
	}
	if !p.polling {
		return
	}
	m.mu.Lock()
	p.wt = wt
	if !p.over && !wt.Immediate() {
		p.timer = time.AfterFunc(wait, p.expire)
	}
	stop := p.stopReq
	m.mu.Unlock()
	if stop != nil {
		p.stop(stop)
	}
}

// settle marks the poll dequeued and frees its tag, before its answer
// goes out (the client may use the tag again at once).
func (p *muxPoll) settle() {
	m := p.m
	m.mu.Lock()
	p.over = true
	if w, ok := m.polls[p.rep.tag]; ok && w == muxWaiter(p) {
		delete(m.polls, p.rep.tag)
	}
	if p.timer != nil {
		p.timer.Stop()
	}
	m.mu.Unlock()
}

// granted is the store's notification: the poll was granted (or the store
// closed).
func (p *muxPoll) granted(wt *store.Wait) {
	p.settle()
	s := p.m.s
	g, err := wt.Result()
	if err != nil {
		p.finish(s.failTo(&p.rep, routeAcquire, err, p.who, false))
		return
	}
	if wt.Early() {
		p.finish(s.deliver(&p.rep, routeAcquire, g, p.req.TTL, false))
		return
	}
	go func() {
		// Not on the granter's goroutine: this waits for an fsync.
		if err := wt.Durable(p.m.ctx); err != nil {
			p.finish(s.failTo(&p.rep, routeAcquire, err, p.who, false))
			return
		}
		p.finish(s.deliver(&p.rep, routeAcquire, g, p.req.TTL, false))
	}()
}

func (p *muxPoll) expire() { p.stop(errWaitOver) }

// stop dequeues the poll, if it still waits, and answers why: its wait
// ran out (the holders), the server is closing, or the client cancelled.
func (p *muxPoll) stop(cause error) {
	m := p.m
	m.mu.Lock()
	if p.over {
		m.mu.Unlock()
		return
	}
	wt := p.wt
	if wt == nil { // startMuxPoll applies it
		if p.stopReq == nil {
			p.stopReq = cause
		}
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()
	if !wt.Cancel() {
		return // granted answers
	}
	p.settle()
	s := m.s
	switch cause {
	case errMuxCancelled:
		s.m.request(routeAcquire, codeGone)
		p.finish(false)
	case errWaitOver:
		p.finish(s.failTo(&p.rep, routeAcquire, s.waitOverError(p.req), p.who, false))
	default:
		p.finish(s.failTo(&p.rep, routeAcquire, cause, p.who, false))
	}
}

// finish ends the poll. ok: its answer went out; else it is answered
// MuxStatusCancelled (every call gets one answer).
func (p *muxPoll) finish(ok bool) {
	if !ok {
		_ = p.m.answer(p.rep.tag, wire.MuxStatusCancelled, cancelledBody, nil)
	}
	if p.polling {
		p.m.s.m.longPolling.Dec()
	}
	p.m.wg.Done()
}
