package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/rearm"
	"github.com/sema-dev/sema/internal/wire"
)

// sema-mux connections (the protocol: internal/wire/mux.go).
//
// One goroutine per connection reads frames and serves each call by its
// op: an acquire starts a poll (wait.go) answered by whoever decides it,
// renewals and releases are answered at once (calls.go). Answers go to
// the connection's output (muxwrite.go), which never makes the goroutine
// that answers wait for the socket.
//
// The connection's read deadline is the idle timeout, renewed while polls
// are in flight. A frame that cannot be parsed closes the connection; so
// does a read error. At the end every poll still waiting is withdrawn
// (answered MuxStatusCancelled if the client only half-closed), the
// answers in progress are written (or their grants given back), and the
// connection closes.

// handleMux serves GET /v1/mux: the upgrade to sema-mux/1, over plain
// HTTP/1.1 or TLS.
func (s *Server) handleMux(w http.ResponseWriter, r *http.Request, who caller) {
	if s.closed.Load() {
		s.fail(w, routeMux, errShuttingDown, who)
		return
	}
	if r.ProtoMajor != 1 || r.ProtoMinor != 1 || !headerHasToken(r.Header, "Connection", "upgrade") ||
		!strings.EqualFold(r.Header.Get("Upgrade"), wire.MuxProtocol) {
		w.Header().Set("Upgrade", wire.MuxProtocol)
		s.fail(w, routeMux, fmt.Errorf("%w: %s needs HTTP/1.1 with Connection: Upgrade and Upgrade: %s",
			errBadRequest, wire.PathMux, wire.MuxProtocol), who)
		return
	}
	if err := s.limits.addConn(who.key); err != nil {
		s.fail(w, routeMux, err, who)
		return
	}
	m, err := s.upgrade(w, r, who)
	if err != nil {
		s.limits.doneConn(who.key)
		return
	}
	s.m.request(routeMux, "ok")
	go m.serve()
}

// upgrade takes the connection over from net/http and answers 101.
func (s *Server) upgrade(w http.ResponseWriter, r *http.Request, who caller) (*muxConn, error) {
	hs, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	nc, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, err
	}
	m := &muxConn{s: s, nc: nc, who: who, to: timeoutsOf(hs), polls: make(map[uint32]*poll)}
	m.wrote = sync.NewCond(&m.wmu)
	m.buf = make([]byte, 0, muxReadSize)
	if n := rw.Reader.Buffered(); n > 0 { // frames sent right behind the upgrade
		p, _ := rw.Reader.Peek(n)
		m.buf = append(m.buf, p...)
	}
	_ = nc.SetDeadline(time.Time{}) // net/http's; ours are set as we go
	m.armWrite()
	if _, err := io.WriteString(nc, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+wire.MuxProtocol+"\r\n\r\n"); err != nil {
		nc.Close()
		return nil, err
	}
	if !s.track(m) {
		nc.Close()
		return nil, errShuttingDown
	}
	return m, nil
}

// headerHasToken reports whether a comma-separated header holds token.
func headerHasToken(h http.Header, key, token string) bool {
	for _, v := range h[key] {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), token) {
				return true
			}
		}
	}
	return false
}

// timeouts are the http.Server's, applied to the connections it hands
// over.
type timeouts struct{ idle, write time.Duration }

func timeoutsOf(hs *http.Server) timeouts {
	t := timeouts{write: defaultMuxWrite}
	if hs == nil {
		return t
	}
	t.idle = hs.IdleTimeout
	if t.idle == 0 {
		t.idle = hs.ReadTimeout
	}
	if hs.WriteTimeout > 0 {
		t.write = hs.WriteTimeout
	}
	return t
}

// defaultMuxWrite bounds a write to a sema-mux client when the http.Server
// sets no write timeout: a client that stops reading is closed after it.
const defaultMuxWrite = 30 * time.Second

// muxReadSize is a connection's read buffer; it grows for a larger frame.
const muxReadSize = 16 << 10

type muxConn struct {
	s   *Server
	nc  net.Conn
	who caller
	to  timeouts

	buf []byte // read, not yet served (conn goroutine only)
	bad error  // a protocol error: the connection closes (conn goroutine only)

	mu      sync.Mutex
	polls   map[uint32]*poll // acquires in flight, by tag
	rdl     time.Time        // the read deadline set
	closing bool             // the server is closing
	calls   sync.WaitGroup   // acquires whose answers are not written yet

	// The way out (muxwrite.go).
	wmu         sync.Mutex
	wrote       *sync.Cond // signalled after each write
	out         []byte     // answers not written yet
	grants      []sema.Grant
	spare       []byte
	spareGrants []sema.Grant
	batch       bool // the conn goroutine serves a read's frames: it writes out after
	writing     bool // a writer is at work
	wdl         time.Time
	werr        error
}

func (m *muxConn) serve() {
	defer m.s.untrack(m)
	defer m.s.limits.doneConn(m.who.key)
	m.end(m.readLoop())
}

// readLoop reads and serves frames until the connection ends.
func (m *muxConn) readLoop() error {
	m.renewRead()
	if len(m.buf) > 0 {
		if err := m.serveFrames(); err != nil {
			return err
		}
	}
	for {
		if len(m.buf) == cap(m.buf) {
			m.buf = append(m.buf, 0)[:len(m.buf)]
		}
		n, err := m.nc.Read(m.buf[len(m.buf):cap(m.buf)])
		if n > 0 {
			m.buf = m.buf[:len(m.buf)+n]
			m.renewRead() // the idle timeout counts from the last bytes read
			if err := m.serveFrames(); err != nil {
				return err
			}
		}
		if err != nil && !(errors.Is(err, os.ErrDeadlineExceeded) && m.renewIdle()) {
			return err
		}
	}
}

// serveFrames serves the complete frames in the buffer; their answers
// go out together at the end.
func (m *muxConn) serveFrames() error {
	m.startBatch()
	p := m.buf
	for m.bad == nil {
		tag, op, body, n, err := wire.ParseMuxRequest(p)
		if err != nil {
			m.bad = err
			break
		}
		if n == 0 {
			break
		}
		m.serveCall(tag, op, body)
		p = p[n:]
	}
	// Keep the start of the next frame. A frame larger than the buffer
	// makes it grow (readLoop), up to the largest valid frame.
	m.buf = m.buf[:copy(m.buf, p)]
	m.endBatch()
	return m.bad
}

// serveCall serves one request frame, by its op.
func (m *muxConn) serveCall(tag uint32, op byte, body []byte) {
	switch op {
	case wire.MuxCancel:
		m.mu.Lock()
		p := m.polls[tag]
		m.mu.Unlock()
		if p != nil {
			p.stop(errMuxCancelled)
		}
	case wire.MuxAcquire:
		m.acquire(tag, body)
	case wire.MuxRenew:
		m.answerNow(tag, routeRenew, m.s.renew, body)
	default:
		m.answerNow(tag, routeRelease, m.s.release, body)
	}
}

// answerNow serves a call answered at once.
func (m *muxConn) answerNow(tag uint32, route string, call func(ctx context.Context, dst, body []byte, who caller) answer, body []byte) {
	bp := getBuf()
	a := call(context.Background(), (*bp)[:0], body, m.who)
	m.s.delivered(route, a, nil, m.send(tag, a, nil))
	putBuf(bp, a.body)
}

// acquire serves an acquire frame: a poll whose answer is sent by whoever
// decides it, without blocking this goroutine.
func (m *muxConn) acquire(tag uint32, body []byte) {
	m.mu.Lock()
	_, dup := m.polls[tag]
	full := len(m.polls) >= wire.MuxMaxCalls
	if !dup && !full {
		m.polls[tag] = nil // reserved: a cancel frame for it waits for the poll
	}
	m.mu.Unlock()
	switch {
	case dup:
		m.bad = fmt.Errorf("%w: tag %d is in use", wire.ErrMuxFrame, tag)
		return
	case full:
		m.refuse(tag, fmt.Errorf("%w: more than %d calls in flight on one sema-mux connection",
			errTooManyWaiters, wire.MuxMaxCalls))
		return
	}
	m.calls.Add(1)
	p, err := m.s.acquire(body, m.who, func(p *poll, g sema.Grant, err error) { m.acquired(tag, p.req.TTL, g, err) })
	if err != nil {
		m.forget(tag)
		m.calls.Done()
		m.refuse(tag, err)
		return
	}
	m.mu.Lock()
	if _, ok := m.polls[tag]; ok {
		m.polls[tag] = p
	}
	m.mu.Unlock()
}

// acquired sends the answer of the acquire tagged tag.
func (m *muxConn) acquired(tag uint32, ttl time.Duration, g sema.Grant, err error) {
	m.forget(tag)
	defer m.calls.Done()
	if errors.Is(err, errMuxCancelled) {
		m.s.m.request(routeAcquire, codeGone)
		m.send(tag, answer{status: wire.MuxStatusCancelled, body: cancelledBody}, nil)
		return
	}

	bp := getBuf()
	a, gp := m.s.outcome((*bp)[:0], g, err, ttl, m.who)
	m.s.delivered(routeAcquire, a, gp, m.send(tag, a, gp))
	putBuf(bp, a.body)
}

// refuse answers tag with err at once.
func (m *muxConn) refuse(tag uint32, err error) {
	bp := getBuf()
	a := m.s.refused((*bp)[:0], routeAcquire, err, m.who)
	m.s.delivered(routeAcquire, a, nil, m.send(tag, a, nil))
	putBuf(bp, a.body)
}

// forget frees tag: the client may use it again once it has the answer.
func (m *muxConn) forget(tag uint32) {
	m.mu.Lock()
	delete(m.polls, tag)
	m.mu.Unlock()
}

// cancelledBody answers a cancelled poll.
var cancelledBody = []byte(`{"error":{"code":"not_acquired","message":"cancelled by the client"}}` + "\n")

// renewIdle is the answer to the read deadline passing: read on if polls
// are in flight (and the server is not closing).
func (m *muxConn) renewIdle() bool {
	m.mu.Lock()
	busy := len(m.polls) > 0 && !m.closing
	m.mu.Unlock()
	if busy {
		m.renewRead()
	}
	return busy
}

// renewRead sets the idle read deadline, if it must move.
func (m *muxConn) renewRead() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return
	}
	if t, ok := rearm.Deadline(m.rdl, m.to.idle, time.Now()); ok {
		m.rdl = t
		_ = m.nc.SetReadDeadline(t)
	}
}

// end ends the connection: every poll still waiting is withdrawn and
// answered (cancelled, or closed if the server is closing), the answers
// in progress are written (a grant that cannot be is given back), and the
// connection closes.
func (m *muxConn) end(err error) {
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrDeadlineExceeded) {
		m.s.log.Debug("sema serve: sema-mux connection ends", "err", err)
	}
	why := errMuxCancelled
	if m.s.closed.Load() {
		why = errShuttingDown
	}
	m.mu.Lock()
	ps := make([]*poll, 0, len(m.polls))
	for _, p := range m.polls {
		if p != nil {
			ps = append(ps, p)
		}
	}
	m.mu.Unlock()
	for _, p := range ps {
		p.stop(why)
	}
	m.calls.Wait()
	m.drain()
	_ = m.nc.Close()
}

// shutdown wakes the read loop, which then ends the connection (its polls
// are ended by the server's Close). Called with s.connMu held.
func (m *muxConn) shutdown() {
	m.mu.Lock()
	m.closing = true
	m.rdl = aLongTimeAgo
	_ = m.nc.SetReadDeadline(aLongTimeAgo)
	m.mu.Unlock()
}

var aLongTimeAgo = time.Unix(1, 0)

// errClosedConn is why nothing more is written to a connection that ended.
var errClosedConn = errors.New("sema-mux connection closed")
