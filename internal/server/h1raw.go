package server

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/sema-dev/sema/internal/rawio"
	"github.com/sema-dev/sema/internal/wire"
)

// The hot loop of a taken-over connection, inside one raw read.
//
// Read through net.Conn, each request costs two read(2)s: the one that
// returns it, and, once it is answered, one that finds nothing (EAGAIN)
// before the goroutine parks in the poller. The second is needed there
// because each net.Conn.Read (and each syscall.RawConn.Read) first forgets
// the readiness the poller recorded, so it must look before it waits.
//
// serveRaw runs the loop inside one syscall.RawConn.Read call instead,
// where the readiness is never forgotten: the callback reads the socket
// itself (nonblocking), serves what it holds, and, when it needs more,
// returns false to wait for the poller, without another read if the last
// read drained the socket (returned less than it asked for): bytes that
// arrive after that read mark the socket ready, and the wait returns at
// once. Every other wait follows a read that found nothing. So a pipelined
// request, or one that arrives while an answer is written, is never lost.
//
// What the loop does not serve itself (the fallback to net/http, a head
// larger than the reader, a body over the limit or larger than the
// reader) is served by next in blocking mode, out of the raw read; the
// loop then starts again. Deadlines are the connection's read deadlines,
// which end the poller's wait.

// rawSrc is what the connection's reader reads: bytes left from net/http,
// then the socket, raw (inside serveRaw's callback) or through net.Conn.
type rawSrc struct {
	nc      net.Conn
	pending []byte // read by net/http before the takeover
	raw     bool   // inside the raw read: read fd, never block
	fd      int
	drained bool // the last raw read (of this wake) returned less than asked
}

// errWouldBlock is a raw read's "nothing to read yet".
var errWouldBlock = errors.New("would block")

func (s *rawSrc) Read(p []byte) (int, error) {
	if len(s.pending) > 0 {
		n := copy(p, s.pending)
		s.pending = s.pending[n:]
		return n, nil
	}
	if !s.raw {
		return s.nc.Read(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := rawio.Read(s.fd, p)
	switch {
	case err == syscall.EAGAIN:
		s.drained = true
		return 0, errWouldBlock
	case err != nil:
		return 0, err
	case n == 0:
		return 0, io.EOF
	}
	s.drained = n < len(p)
	return n, nil
}

// canWait reports whether the raw loop, which needs more bytes than it
// holds, may wait for the poller without reading first: nothing is pending
// and the socket was drained since the raw read began (or last woke).
func (c *h1conn) canWait() bool {
	return len(c.src.pending) == 0 && c.src.drained
}

// A step is what the raw loop does next.
type step int

const (
	stepWait     step = iota // wait for the socket to be readable
	stepClose                // close the connection
	stepBlocking             // serve the next request with next, in blocking mode
)

// serveRaw serves the connection until it closes. It reports false if the
// connection cannot be read raw (the caller then serves it with next).
func (c *h1conn) serveRaw() bool {
	rc := c.rc
	if rc == nil {
		return false
	}
	for {
		var st step
		err := rc.Read(func(fd uintptr) bool {
			c.src.raw, c.src.fd, c.src.drained = true, int(fd), false
			st = c.rawLoop()
			c.src.raw = false
			if c.deferred { // before any wait
				c.deferred = false
				c.flushPend()
			}
			return st != stepWait
		})
		c.src.raw = false
		if err != nil {
			// A deadline, or the connection closed.
			if c.poll != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) && c.renewWatch() {
					continue
				}
				c.endWatch(err)
			}
			return true
		}
		c.headArmed, c.bodyArmed = false, false // next arms its own
		if st == stepClose || !c.next() {
			return true
		}
	}
}

// rawLoop serves the requests the socket holds, until it must wait, close,
// or serve one in blocking mode. Every stepWait follows a read that found
// nothing, or canWait.
func (c *h1conn) rawLoop() step {
	for {
		if c.poll != nil {
			if c.br.Buffered() == 0 {
				if c.canWait() {
					return stepWait
				}
				if _, err := c.br.Peek(1); err == errWouldBlock {
					return stepWait
				} else if err != nil {
					c.endWatch(err)
					return stepClose
				}
			}
			if !c.endWatch(nil) {
				return stepClose
			}
			continue
		}
		if c.br.Buffered() == 0 {
			if st, ok := c.rawIdle(); !ok {
				return st
			}
			continue
		}
		st, ok := c.rawRequest()
		if !ok {
			return st
		}
	}
}

// rawIdle waits, within the idle timeout, for the next request's first
// bytes. ok: some were read.
func (c *h1conn) rawIdle() (step, bool) {
	if !c.idleSet { // else set before this wake
		c.mu.Lock()
		if c.s.closed.Load() {
			c.mu.Unlock()
			return stepClose, false
		}
		c.idle, c.idleSet = true, true
		if t, ok := renew(c.rdl, c.to.idle); ok {
			c.setReadDeadlineLocked(t)
		}
		c.mu.Unlock()
	}
	if c.canWait() {
		return stepWait, false // idle stays set: closeIdle may end the wait
	}
	_, err := c.br.Peek(1)
	if err == errWouldBlock {
		return stepWait, false
	}
	c.notIdle()
	if err != nil {
		return stepClose, false
	}
	return 0, true
}

// notIdle clears the idle mark rawIdle set, if it did.
func (c *h1conn) notIdle() {
	if c.idleSet {
		c.idleSet = false
		c.mu.Lock()
		c.idle = false
		c.mu.Unlock()
	}
}

// rawRequest serves the buffered request once it is all there. ok: it was
// served and the connection stays open.
func (c *h1conn) rawRequest() (step, bool) {
	c.notIdle()
	n := c.br.Buffered()
	p, _ := c.br.Peek(n)
	end := headEnd(p)
	if end < 0 {
		if n >= c.br.Size() {
			return stepBlocking, false // a large head: next reads it
		}
		if !c.headArmed && c.to.head > 0 {
			c.headArmed = true
			c.setReadDeadline(deadline(c.to.head))
		}
		return c.rawMore(n)
	}
	h, ok := c.s.parseHead(p[:end])
	if !ok || h.length > wire.MaxBodyBytes || h.headBytes+int(h.length) > c.br.Size() {
		return stepBlocking, false
	}
	need := h.headBytes + int(h.length)
	if n < need {
		if !c.bodyArmed && c.to.read > 0 {
			c.bodyArmed = true
			c.setReadDeadline(deadline(c.to.read))
		}
		return c.rawMore(n)
	}
	c.headArmed, c.bodyArmed = false, false
	who, authed := c.s.creds.authenticateBytes(h.auth)
	bp := bodyBufs.Get().(*[]byte)
	b := append((*bp)[:0], p[h.headBytes:need]...)
	*bp = b
	_, _ = c.br.Discard(need)
	c.more = c.br.Buffered() > 0
	c.deferred = c.deferred || c.more
	open := c.hot(h.rt, who, authed, b, nil, h.close)
	c.more = false
	putBodyBuf(bp)
	if !open {
		return stepClose, false
	}
	return 0, true
}

// rawMore reads more of a request of which n bytes are buffered. ok: some
// were read (the caller parses again).
func (c *h1conn) rawMore(n int) (step, bool) {
	if c.canWait() {
		return stepWait, false
	}
	if _, err := c.br.Peek(n + 1); err == errWouldBlock {
		return stepWait, false
	} else if err != nil {
		return stepClose, false
	}
	return 0, true
}
