package remote

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// h1Pool is a minimal HTTP/1.1 client for plain-http servers: a pool of
// keep-alive connections on which the calling goroutine writes the request
// and reads the answer itself. Compared with net/http's Transport it saves
// two goroutine switches, a header map and a dozen allocations per call,
// which is most of a call's client-side cost on loopback. https, proxies
// and a caller's own http.Client go through net/http instead.
type h1Pool struct {
	addr    string // host:port to dial
	host    string // Host header
	dialer  net.Dialer
	maxIdle int

	mu     sync.Mutex
	idle   []*h1Conn                 // LIFO: the warmest connection first
	polls  map[*h1Conn]time.Duration // long polls in flight, with their drain: close aborts them
	closed bool
}

type h1Conn struct {
	nc      net.Conn
	sr      *sendReader // under br: sends a request with its first read
	br      *bufio.Reader
	req     []byte      // request buffer, reused
	dl      time.Time   // the deadline last set (setting one costs a timer update)
	idled   time.Time   // when it went back to the pool
	aborted atomic.Bool // the exchange was aborted: the connection is not reused
}

// errRetry marks a failure on a reused connection before any answer byte
// arrived: the server may have closed it while idle. Requests of this API
// are idempotent (lease IDs), so they are sent again on a new connection.
var errRetry = errors.New("stale keep-alive connection")

// errStalled is what a connection's deadline turns into when ctx ended.
var aLongTimeAgo = time.Unix(1, 0)

func newH1Pool(addr, host string, dialTimeout time.Duration, maxIdle int) *h1Pool {
	return &h1Pool{
		addr: addr, host: host, maxIdle: maxIdle,
		dialer: net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second},
		polls:  make(map[*h1Conn]time.Duration),
	}
}

// do sends one request and reads the answer's body into out. target is the
// escaped request target (path and query). A deadline, if not zero, bounds
// the whole exchange in addition to ctx.
//
// If drain > 0 and ctx ends while the answer is awaited, the request is not
// simply abandoned: the connection is half-closed, which ends the request's
// context on the server, and the server's final answer is still read (for
// up to drain). So a grant the server made just then is not lost: the
// caller gets it (with a nil error) and gives it back. This closes the race
// between a cancelled acquire and a grant, which releasing by lease ID from
// another connection cannot: that release may reach the server first.
//
// A poll (a waiting acquire) is also ended so by close, which is how
// Backend.Close ends waiting acquires without a context per call.
func (p *h1Pool) do(ctx context.Context, method, target string, hdr []byte, body []byte, key string, deadline time.Time, drain time.Duration, poll bool, out []byte) (int, []byte, error) {
	for attempt := 0; ; attempt++ {
		c, reused, err := p.get(ctx, poll, drain)
		if err != nil {
			return 0, out, err
		}
		status, res, keep, err := c.exchange(ctx, method, target, p.host, hdr, body, key, deadline, drain, out, reused)
		p.put(c, poll, keep && err == nil)
		if err == nil {
			return status, res, nil
		}
		if errors.Is(err, errRetry) && attempt < 2 && ctx.Err() == nil {
			continue
		}
		if cerr := ctx.Err(); cerr != nil {
			return 0, out, fmt.Errorf("%w (%w)", context.Cause(ctx), err)
		}
		return 0, out, err
	}
}

// afterCloseKey marks the context of a call that must reach the server even
// after close: giving back a grant that a closing Acquire received.
type afterCloseKey struct{}

// get takes an idle connection or dials one. A poll's connection is
// registered, so that close can abort it.
func (p *h1Pool) get(ctx context.Context, poll bool, drain time.Duration) (*h1Conn, bool, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		if poll || ctx.Value(afterCloseKey{}) == nil {
			return nil, false, net.ErrClosed
		}
		// A connection of its own, closed after the call (put sees closed).
		nc, err := p.dialer.DialContext(ctx, "tcp", p.addr)
		if err != nil {
			return nil, false, err
		}
		return newH1Conn(nc, 512), false, nil
	}
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		if poll {
			p.polls[c] = drain
		}
		p.mu.Unlock()
		return c, true, nil
	}
	p.mu.Unlock()
	nc, err := p.dialer.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, false, err
	}
	c := newH1Conn(nc, 4096)
	if poll {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			nc.Close()
			return nil, false, net.ErrClosed
		}
		p.polls[c] = drain
		p.mu.Unlock()
	}
	return c, false, nil
}

func newH1Conn(nc net.Conn, size int) *h1Conn {
	sr := newSendReader(nc)
	return &h1Conn{nc: nc, sr: sr, br: bufio.NewReaderSize(sr, size), req: make([]byte, 0, 512)}
}

// put ends an exchange on c: it keeps c for another one if keep, or closes
// it.
func (p *h1Pool) put(c *h1Conn, poll, keep bool) {
	keep = keep && !c.aborted.Load()
	p.mu.Lock()
	if poll {
		delete(p.polls, c)
	}
	if !keep || p.closed || len(p.idle) >= p.maxIdle {
		p.mu.Unlock()
		c.nc.Close()
		return
	}
	c.idled = time.Now()
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

// close closes idle connections and aborts long polls in flight (their
// final answers are still read); busy connections are closed when they
// come back.
func (p *h1Pool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	polls := p.polls
	p.polls = map[*h1Conn]time.Duration{}
	p.mu.Unlock()
	for _, c := range idle {
		c.nc.Close()
	}
	for c, drain := range polls {
		c.abort(drain)
	}
}

// abort ends the exchange in flight on c, once: with drain > 0 it
// half-closes the connection, which ends the request on the server, and
// leaves drain to read the final answer; otherwise (or if half-closing
// fails) it fails the exchange at once.
func (c *h1Conn) abort(drain time.Duration) {
	if !c.aborted.CompareAndSwap(false, true) {
		return
	}
	if tc, ok := c.nc.(*net.TCPConn); ok && drain > 0 {
		_ = c.nc.SetDeadline(time.Now().Add(drain))
		if tc.CloseWrite() == nil {
			return
		}
	}
	_ = c.nc.SetDeadline(aLongTimeAgo)
}

// exchange writes one request and reads its answer. keep says whether the
// connection may carry another request.
func (c *h1Conn) exchange(ctx context.Context, method, target, host string, hdr, body []byte, key string,
	deadline time.Time, drain time.Duration, out []byte, reused bool) (status int, res []byte, keep bool, err error) {
	if !deadline.Equal(c.dl) {
		if err := c.nc.SetDeadline(deadline); err != nil {
			return 0, out, false, err
		}
		c.dl = deadline
	}
	if c.aborted.Load() { // by close, before the deadline above was set
		return 0, out, false, net.ErrClosed
	}
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { c.abort(drain) })
		defer func() {
			if !stop() && err == nil {
				// ctx ended while the answer was read: the deadline may be
				// set already, so the connection cannot be trusted again.
				keep = false
			}
		}()
	}
	r := appendRequest(c.req[:0], method, target, host, hdr, key, body)
	c.req = r
	if c.br.Buffered() == 0 && (!reused || time.Since(c.idled) < maxQuietIdle) {
		// Written by the first read of the answer (h1raw.go).
		c.sr.req = r
	} else if _, err := c.nc.Write(r); err != nil {
		if reused {
			return 0, out, false, fmt.Errorf("%w: %w", errRetry, err)
		}
		return 0, out, false, err
	}
	if _, err := c.br.Peek(1); err != nil {
		var se *errSend
		if reused && (errors.As(err, &se) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err)) {
			// A server that closed the idle connection answers nothing
			// at all.
			return 0, out, false, fmt.Errorf("%w: %w", errRetry, err)
		}
		if errors.As(err, &se) {
			err = se.err
		}
		return 0, out, false, err
	}
	status, res, keep, err = readResponse(c.br, out)
	return status, res, keep, err
}

// appendRequest appends an HTTP/1.1 request to r: hdr holds the constant
// header lines, key (if any) is sent as Idempotency-Key, body (if not nil)
// as JSON.
func appendRequest(r []byte, method, target, host string, hdr []byte, key string, body []byte) []byte {
	r = append(r, method...)
	r = append(r, ' ')
	r = append(r, target...)
	r = append(r, " HTTP/1.1\r\nHost: "...)
	r = append(r, host...)
	r = append(r, "\r\n"...)
	r = append(r, hdr...)
	if key != "" {
		r = append(r, "Idempotency-Key: "...)
		r = append(r, key...)
		r = append(r, "\r\n"...)
	}
	if body != nil {
		r = append(r, "Content-Type: application/json\r\nContent-Length: "...)
		r = strconv.AppendInt(r, int64(len(body)), 10)
		r = append(r, "\r\n"...)
	}
	r = append(r, "\r\n"...)
	return append(r, body...)
}

// maxQuietIdle is how long a pooled connection may have been idle and
// still send its request without reading first (h1raw.go). A server that
// closed the connection meanwhile made it readable (EOF) while nobody
// waited; the raw path does not see that, and relies on the server's
// answer to the request (a reset) to wake it. A connection idle for
// longer reads first, as net.Conn does, and notices the close at once.
const maxQuietIdle = 250 * time.Millisecond

// isReset reports a connection reset by the peer.
func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}
