package server

import (
	"errors"
	"os"
	"time"
)

// A taken-over connection during a long poll.

// watch waits, while a long poll runs, for the client's next bytes: the
// next request once the poll is answered, or a hang-up, which ends the
// poll. The read deadline stays the connection's idle one; when it passes
// while the poll still runs (a poll may last longer), it is renewed.
func (c *h1conn) watch() bool {
	var err error
	for {
		_, err = c.br.Peek(1)
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) || !c.renewWatch() {
			break
		}
	}
	return c.endWatch(err)
}

// endWatch ends the watch of a long poll: the client's next bytes came
// (err nil), or err (a hang-up), which ends the poll. It waits for the
// poll's answer and reports whether the connection stays open.
func (c *h1conn) endWatch(err error) bool {
	p := c.poll
	if err != nil {
		p.cancel(errClientGone)
	}
	<-p.done
	c.poll = nil
	c.mu.Lock()
	c.idle = false
	c.mu.Unlock()
	return err == nil && p.ok && !p.close
}

// renewWatch is watch's answer to its read deadline passing: it reports
// whether to read on. A poll still running gets the idle deadline again
// (none if there is no idle timeout). Once the poll has ended, backToIdle
// has set the deadline: if that one has not passed (or is none), the one
// that fired was older; a shutdown's has passed.
func (c *h1conn) renewWatch() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.idle {
		c.setReadDeadlineLocked(deadline(c.to.idle))
		return true
	}
	return c.rdl.IsZero() || time.Now().Before(c.rdl)
}

// backToIdle puts the connection back to waiting for its next request after
// a long poll: under the idle timeout again, and closed at once if the
// server is closing.
func (c *h1conn) backToIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.idle = true
	c.apoll = nil
	if c.s.closed.Load() {
		c.setReadDeadlineLocked(aLongTimeAgo)
	} else if t, ok := renew(c.rdl, c.to.idle); ok {
		c.setReadDeadlineLocked(t)
	}
}
