package server

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/sema-dev/sema/internal/rawio"
	"github.com/sema-dev/sema/internal/wire"
)

// Taken-over connections.
//
// net/http costs more CPU per request than everything else the server
// does for an acquire or a release. So after net/http has served a hot
// request (acquire, renew, release) on a plain-HTTP/1.1 keep-alive
// connection, the server hijacks the connection and serves its next
// requests itself: one goroutine per connection reads each request with a
// bufio.Reader, inside one raw read of the socket (h1raw.go: one read(2)
// per request), parses the head of a hot POST itself (h1parse.go) and
// writes each answer with one write(2). Every other request on such a
// connection (other routes, unusual framing) is parsed by net/http's
// http.ReadRequest and served by the same handlers (h1fallback.go). TLS
// connections stay with net/http. The http.Server's timeouts are applied
// (idle, head, body, write); a long poll runs on its own goroutine while
// the connection's goroutine waits for the next bytes from the client,
// which detects a hang-up (the poll is then dequeued, as with net/http).

// h1conn is a taken-over connection.
type h1conn struct {
	s  *Server
	nc net.Conn
	rc syscall.RawConn // nc's, if it has one: raw reads (h1raw.go)
	w  io.Writer       // writes nc: with raw write(2)s if it can (h1write.go)
	br *bufio.Reader
	to timeouts

	mu    sync.Mutex // guards idle, rdl and apoll
	idle  bool
	rdl   time.Time  // the read deadline set
	apoll *asyncPoll // the async long poll in progress (ended by Close)

	wmu  sync.Mutex // serializes writes (a long poll and its heartbeats)
	out  []byte
	pend []byte    // answers of pipelined requests not written yet (h1write.go)
	wdl  time.Time // the write deadline set (guarded by wmu)

	src       rawSrc // what br reads (h1raw.go)
	headArmed bool   // the raw loop set the head deadline of the request in progress
	bodyArmed bool   // … and its body's read deadline
	idleSet   bool   // the raw loop set idle (conn goroutine only)
	more      bool   // the request being served is followed by buffered bytes (raw loop)
	deferred  bool   // an answer of this wake may wait in pend: flush before waiting

	rep   h1reply     // the answer of the request in progress (reused)
	poll  *h1poll     // the long poll in progress, or nil (conn goroutine only)
	polls chan func() // jobs of the long-poll goroutine, started on first use
}

// timeouts are the http.Server's, applied by the connection loop.
type timeouts struct {
	idle, head, read, write time.Duration
	maxHead                 int
}

func timeoutsOf(hs *http.Server) timeouts {
	t := timeouts{maxHead: http.DefaultMaxHeaderBytes + 4096}
	if hs == nil {
		return t
	}
	t.read, t.write, t.idle, t.head = hs.ReadTimeout, hs.WriteTimeout, hs.IdleTimeout, hs.ReadHeaderTimeout
	if t.idle == 0 {
		t.idle = t.read
	}
	if t.head == 0 {
		t.head = t.read
	}
	if hs.MaxHeaderBytes > 0 {
		t.maxHead = hs.MaxHeaderBytes + 4096
	}
	return t
}

func deadline(d time.Duration) time.Time {
	if d <= 0 {
		return time.Time{}
	}
	return time.Now().Add(d)
}

// takeOver hijacks r's connection, whose hot request has just been
// answered, and serves it from now on, if it is plain HTTP/1.1 that
// stays open.
func (s *Server) takeOver(w http.ResponseWriter, r *http.Request) {
	if r.TLS != nil || r.ProtoMajor != 1 || r.ProtoMinor != 1 || r.Close || s.closed.Load() {
		return
	}
	if w.Header()["Content-Length"] == nil {
		return // a chunked answer (after heartbeats): net/http ends it
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		return
	}
	hs, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	nc, rw, err := hj.Hijack()
	if err != nil {
		return
	}
	c := &h1conn{s: s, nc: nc, w: nc, to: timeoutsOf(hs)}
	if rw, ok := rawio.New(nc); ok {
		c.rc, c.w = rw.RawConn(), rw
	}
	// Read the socket itself from now on, not through net/http's reader:
	// what that one holds is read first.
	c.src.nc = nc
	if n := rw.Reader.Buffered(); n > 0 {
		p, _ := rw.Reader.Peek(n)
		c.src.pending = append([]byte(nil), p...)
	}
	c.br = bufio.NewReaderSize(&c.src, rw.Reader.Size())
	if !s.track(c) {
		nc.Close()
		return
	}
	go c.serve()
}

// A liveConn is a connection the server serves itself (taken over, or
// upgraded to sema-mux): Close must end its waits (shutdown, called with
// connMu held), Shutdown may have to close it (kill).
type liveConn interface {
	shutdown()
	kill()
}

// track adds c to the live connections, unless the server is closing.
func (s *Server) track(c liveConn) bool {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if s.closed.Load() {
		return false
	}
	if s.conns == nil {
		s.conns = make(map[liveConn]struct{})
	}
	s.conns[c] = struct{}{}
	s.connWG.Add(1)
	return true
}

func (s *Server) untrack(c liveConn) {
	s.connMu.Lock()
	delete(s.conns, c)
	s.connMu.Unlock()
	s.connWG.Done()
}

// closeIdle tells every live connection that the server is closing.
func (s *Server) closeIdle() {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	for c := range s.conns {
		c.shutdown()
	}
}

// shutdown wakes the connection if it waits for a request (it then
// closes) and ends its async long poll.
func (c *h1conn) shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idle {
		c.setReadDeadlineLocked(aLongTimeAgo)
	}
	if a := c.apoll; a != nil {
		go a.end(errShuttingDown)
	}
}

func (c *h1conn) kill() { c.nc.Close() }

var aLongTimeAgo = time.Unix(1, 0)

func (c *h1conn) serve() {
	defer c.s.untrack(c)
	defer c.nc.Close()
	if !c.serveRaw() {
		for c.next() {
		}
	}
	if c.poll != nil {
		c.poll.cancel(errClientGone)
		<-c.poll.done
	}
	if c.polls != nil {
		close(c.polls)
	}
}

// errClientGone ends a long poll whose client hung up.
var errClientGone = errors.New("client gone")

// next serves one request. It reports whether the connection stays open.
func (c *h1conn) next() bool {
	if !c.waitRequest() {
		return false
	}
	head, err := c.peekHead()
	if err != nil {
		if errors.Is(err, errHeadTooLarge) {
			c.writeRaw("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large")
		}
		return false
	}
	h, ok := c.s.parseHead(head)
	if !ok {
		return c.fallback()
	}
	// Authenticate now: h.auth points into the reader's buffer, which
	// reading the body may overwrite.
	who, authed := c.s.creds.authenticateBytes(h.auth)
	_, _ = c.br.Discard(h.headBytes)
	if h.length > wire.MaxBodyBytes {
		// Answered as net/http's MaxBytesReader would have it; the body is
		// not read, so the connection closes.
		c.hot(h.rt, who, authed, nil, &http.MaxBytesError{Limit: wire.MaxBodyBytes}, true)
		c.linger()
		return false
	}
	bp := bodyBufs.Get().(*[]byte)
	defer putBodyBuf(bp)
	b := grow((*bp)[:0], int(h.length))[:h.length]
	*bp = b
	if c.br.Buffered() < len(b) && c.to.read > 0 {
		c.setReadDeadline(deadline(c.to.read))
	}
	if _, err := io.ReadFull(c.br, b); err != nil {
		return false
	}
	return c.hot(h.rt, who, authed, b, nil, h.close)
}

// waitRequest waits for the first byte of the next request, within the
// idle timeout. It reports false if the connection is to close.
func (c *h1conn) waitRequest() bool {
	if c.poll != nil {
		return c.watch()
	}
	if c.br.Buffered() > 0 {
		return true
	}
	c.mu.Lock()
	if c.s.closed.Load() {
		c.mu.Unlock()
		return false
	}
	c.idle = true
	if t, ok := renew(c.rdl, c.to.idle); ok {
		c.setReadDeadlineLocked(t)
	}
	c.mu.Unlock()
	_, err := c.br.Peek(1)
	c.mu.Lock()
	c.idle = false
	c.mu.Unlock()
	return err == nil
}

var errHeadTooLarge = errors.New("request head too large")

// peekHead returns the next request's head, left in the reader.
func (c *h1conn) peekHead() ([]byte, error) {
	armed := false
	for {
		n := c.br.Buffered()
		p, _ := c.br.Peek(n)
		if end := headEnd(p); end >= 0 {
			return p[:end], nil
		}
		if n >= c.to.maxHead {
			return nil, errHeadTooLarge
		}
		if n == c.br.Size() {
			// A head larger than the reader: read on through a larger
			// one, which reads what this one holds first.
			c.src.pending = append(append([]byte(nil), p...), c.src.pending...)
			c.br = bufio.NewReaderSize(&c.src, c.to.maxHead)
			continue
		}
		if !armed && c.to.head > 0 {
			armed = true
			c.setReadDeadline(deadline(c.to.head))
		}
		if _, err := c.br.Peek(n + 1); err != nil {
			return nil, err
		}
	}
}

// hot serves a hot request from who (401 if not authed). It reports
// whether the connection stays open.
func (c *h1conn) hot(rt *route, who caller, authed bool, b []byte, rerr error, closeAfter bool) bool {
	if !authed {
		e := c.s.errorBody(rt.label, errUnauthorized, caller{})
		c.wmu.Lock()
		err := c.writeLocked(e.status, e.b, false, `WWW-Authenticate: Bearer realm="sema"`+"\r\n", closeAfter, false)
		c.wmu.Unlock()
		c.s.m.request(rt.label, e.code)
		return err == nil && !closeAfter
	}
	c.rep = h1reply{c: c, close: closeAfter || c.s.closed.Load(), batch: c.more && rt.label != routeAcquire}
	answered := rt.hot(c.s, &c.rep, b, rerr, who)
	if c.poll != nil {
		return true // the poll answers; watch decides
	}
	return answered && !c.rep.close
}
