package server

import (
	"context"
	"time"
)

// h1reply answers a request on a taken-over connection.
type h1reply struct {
	c     *h1conn
	close bool            // the connection closes after this answer
	batch bool            // more of a pipelined request is buffered: the answer may wait in c.pend
	ctx   context.Context // a long poll's: ends when the client hangs up
}

func (r h1reply) gone() context.Context {
	if r.ctx == nil {
		return context.Background()
	}
	return r.ctx
}

func (r h1reply) send(status int, body []byte, committed bool) error {
	r.c.wmu.Lock()
	defer r.c.wmu.Unlock()
	return r.c.writeLocked(status, body, committed, "", r.close, r.batch)
}

var (
	chunkedHead = "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
	spaceChunk  = "1\r\n \r\n"
)

func (r h1reply) beat(first bool) error {
	c := r.c
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b := c.out[:0]
	if first {
		b = appendStatus(b, 200)
		b = append(b, chunkedHead...)
		b = append(b, "Date: "...)
		b = append(b, httpDate()[0]...)
		b = append(b, "\r\n"...)
		if r.close {
			b = append(b, "Connection: close\r\n"...)
		}
		b = append(b, "\r\n"...)
	}
	b = append(b, spaceChunk...)
	c.out = b
	return c.writeOut(b, time.Now())
}

// extend changes no deadline on a taken-over connection: each write of a
// long poll (heartbeat, answer) arms its own write deadline (armWrite), and
// the connection's idle read deadline, which the poll may outlive, is
// renewed by watch while the poll runs. That saves three deadline updates
// per long poll.
func (r h1reply) extend(time.Time) {}

// h1poll is a long poll running on its own goroutine while the
// connection's goroutine watches for a hang-up (h1conn.watch).
type h1poll struct {
	cancel context.CancelCauseFunc
	done   chan struct{} // closed once answered (or given up)
	ok     bool          // the answer went out
	close  bool          // the connection closes after it
}

// await starts poll on its own goroutine, with a reply whose context ends
// when the connection's goroutine sees the client hang up.
func (r h1reply) await(poll func(replier) bool) bool {
	c := r.c
	ctx, cancel := context.WithCancelCause(context.Background())
	p := &h1poll{cancel: cancel, done: make(chan struct{}), close: r.close}
	c.poll = p
	if c.polls == nil {
		// One goroutine per connection runs its long polls, one at a
		// time: cheaper than a new goroutine (and stack) per poll.
		c.polls = make(chan func())
		go func() {
			for job := range c.polls {
				job()
			}
		}()
	}
	c.polls <- func() {
		p.ok = poll(&h1reply{c: c, close: r.close, ctx: ctx})
		cancel(nil)
		c.backToIdle()
		close(p.done)
	}
	return true
}
