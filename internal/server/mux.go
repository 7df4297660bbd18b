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
	"syscall"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/rawio"
	"github.com/sema-dev/sema/internal/rearm"
	"github.com/sema-dev/sema/internal/wire"
)

// sema-mux connections (the protocol: internal/wire/mux.go).
//
// One goroutine per connection reads the frames and serves each call as
// a taken-over connection serves a hot request (the same handlers, through
// muxReply); a long poll waits in the store's queue without a goroutine
// (muxpoll.go) and is answered by whoever grants it. Answers produced while
// the connection's goroutine serves the frames of one read (among them the
// grants its releases hand over to polls of the same connection) go out
// together in one write(2) when it is done; any other answer is written at
// once. So under load a client process with many goroutines costs the
// server about one read and one write per batch of calls, not one per
// call.
//
// The connection's read deadline is the idle timeout, renewed while polls
// are in flight. A frame that cannot be parsed closes the connection; so
// does a read error. At the end every poll still queued is dequeued
// (answered MuxStatusCancelled if the client only half-closed), the
// answers in progress are written (or their grants given back), and the
// connection closes.

// handleMux serves GET /v1/mux: the upgrade to sema-mux/1.
func (s *Server) handleMux(w http.ResponseWriter, r *http.Request, who caller) {
	if s.closed.Load() {
		s.fail(w, routeMux, errShuttingDown, who, false)
		return
	}
	if r.ProtoMajor != 1 || r.ProtoMinor != 1 || !headerHasToken(r.Header, "Connection", "upgrade") ||
		!strings.EqualFold(r.Header.Get("Upgrade"), wire.MuxProtocol) {
		w.Header().Set("Upgrade", wire.MuxProtocol)
		s.fail(w, routeMux, fmt.Errorf("%w: %s needs HTTP/1.1 with Connection: Upgrade and Upgrade: %s",
			errBadRequest, wire.PathMux, wire.MuxProtocol), who, false)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		s.fail(w, routeMux, fmt.Errorf("%w: this connection cannot be upgraded", errBadRequest), who, false)
		return
	}
	hs, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	nc, rw, err := hj.Hijack()
	if err != nil {
		return
	}
	m := &muxConn{s: s, nc: nc, w: nc, who: who, to: timeoutsOf(hs), polls: make(map[uint32]muxWaiter)}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.flushed = sync.NewCond(&m.wmu)
	if n := rw.Reader.Buffered(); n > 0 { // frames sent right behind the upgrade
		p, _ := rw.Reader.Peek(n)
		m.buf = append(make([]byte, 0, max(muxReadSize, n)), p...)
	} else {
		m.buf = make([]byte, 0, muxReadSize)
	}
	_ = nc.SetDeadline(time.Time{}) // net/http's; ours are set below
	if rc, ok := rawio.New(nc); ok {
		m.rc, m.w = rc.RawConn(), rc
	}
	m.armWrite(time.Now())
	if _, err := io.WriteString(m.w, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+wire.MuxProtocol+"\r\n\r\n"); err != nil {
		nc.Close()
		return
	}
	if !s.track(m) {
		nc.Close()
		return
	}
	s.m.request(routeMux, "ok")
	go m.serve()
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

// muxReadSize is a connection's read buffer; it grows for a larger frame.
const muxReadSize = 16 << 10

type muxConn struct {
	s   *Server
	nc  net.Conn
	rc  syscall.RawConn // nc's, if it has one: raw reads
	w   io.Writer       // writes nc (raw write(2)s if it can)
	who caller
	to  timeouts

	// ctx ends when the connection does: a grant not yet written is then
	// given back (deliver).
	ctx    context.Context
	cancel context.CancelFunc

	buf []byte   // read, not yet served (conn goroutine only)
	rep muxReply // the answer of the call being served (conn goroutine)
	bad error    // a protocol error: the connection closes (conn goroutine)

	mu      sync.Mutex
	polls   map[uint32]muxWaiter // long polls in flight, by tag
	rdl     time.Time            // the read deadline set
	closing bool                 // the server is closing
	wg      sync.WaitGroup       // polls and their answers in progress

	wmu         sync.Mutex
	out         []byte       // answers not written yet
	grants      []sema.Grant // the grants among them: given back if the write fails
	spare       []byte
	spareGrants []sema.Grant
	batch       bool       // the conn goroutine serves a read's frames: out is written after
	flushing    bool       // a flusher goroutine writes out
	flushed     *sync.Cond // signalled when a flusher is done
	wdl         time.Time
	werr        error
}

// A muxWaiter is a long poll in flight: stop dequeues it (if it still
// waits) and answers why.
type muxWaiter interface{ stop(cause error) }

// errMuxCancelled is the cause of a poll the client cancelled.
var errMuxCancelled = errors.New("cancelled by the client")

// cancelledBody answers a cancelled poll.
var cancelledBody = []byte(`{"error":{"code":"not_acquired","message":"cancelled by the client"}}` + "\n")

func (m *muxConn) serve() {
	defer m.s.untrack(m)
	err := m.readLoop()
	m.end(err)
}

// readLoop reads and serves frames until the connection ends.
func (m *muxConn) readLoop() error {
	m.renewRead()
	for {
		var err error
		if m.rc != nil {
			var rerr error
			err = m.rc.Read(func(fd uintptr) bool {
				rerr = m.readRaw(int(fd))
				return rerr != errWouldBlock
			})
			if err == nil && rerr != nil {
				return rerr
			}
		} else {
			err = m.readSome(m.nc.Read)
		}
		if err != nil && !(errors.Is(err, os.ErrDeadlineExceeded) && m.renewIdle()) {
			return err
		}
	}
}

// readRaw reads the socket (nonblocking) and serves what it holds, until
// it must wait: errWouldBlock after a read that drained the socket or
// found nothing (a wait inside one RawConn.Read does not miss bytes that
// came after such a read: h1raw.go).
func (m *muxConn) readRaw(fd int) error {
	for {
		full := false
		err := m.readSome(func(p []byte) (int, error) {
			n, err := rawio.Read(fd, p)
			switch {
			case err == syscall.EAGAIN:
				return 0, errWouldBlock
			case err != nil:
				return 0, err
			case n == 0:
				return 0, io.EOF
			}
			full = n == len(p)
			return n, nil
		})
		if err != nil {
			return err
		}
		if !full {
			return errWouldBlock
		}
	}
}

// readSome reads once into the buffer with read and serves the complete
// frames it then holds.
func (m *muxConn) readSome(read func([]byte) (int, error)) error {
	if len(m.buf) == cap(m.buf) {
		m.buf = append(m.buf, 0)[:len(m.buf)]
	}
	n, err := read(m.buf[len(m.buf):cap(m.buf)])
	if err != nil {
		return err
	}
	m.buf = m.buf[:len(m.buf)+n]
	m.renewRead() // the idle timeout counts from the last bytes read
	return m.serveFrames()
}

// serveFrames serves the complete frames in the buffer; their answers
// go out in one write at the end.
func (m *muxConn) serveFrames() error {
	m.wmu.Lock()
	m.batch = true
	m.wmu.Unlock()
	p := m.buf
	var err error
	for m.bad == nil {
		tag, op, body, n, perr := wire.ParseMuxRequest(p)
		if perr != nil {
			m.bad = perr
			break
		}
		if n == 0 {
			break
		}
		m.serveCall(tag, op, body)
		p = p[n:]
	}
	err = m.bad
	// Keep the start of the next frame. A frame larger than the buffer
	// makes it grow (readSome), up to twice the largest valid frame.
	m.buf = m.buf[:copy(m.buf, p)]
	m.wmu.Lock()
	m.batch = false
	m.flushLocked()
	// A client that sends but does not read its answers is not read
	// either once they pile up (the flusher's write deadline ends that).
	for m.flushing && len(m.out) > muxMaxOut {
		m.flushed.Wait()
	}
	m.wmu.Unlock()
	return err
}

// muxMaxOut bounds the answers a connection's goroutine lets wait for the
// socket before it stops reading calls.
const muxMaxOut = 1 << 20

// serveCall serves one request frame.
func (m *muxConn) serveCall(tag uint32, op byte, body []byte) {
	s := m.s
	var rt *route
	switch op {
	case wire.MuxCancel:
		m.mu.Lock()
		w := m.polls[tag]
		m.mu.Unlock()
		if w != nil {
			w.stop(errMuxCancelled)
		}
		return
	case wire.MuxAcquire:
		if se, ok := s.eng.(storeEngine); ok {
			m.acquireStore(se, tag, body)
			return
		}
		rt = s.routes[wire.PathAcquire]
	case wire.MuxRenew:
		rt = s.routes[wire.PathRenew]
	default:
		rt = s.routes[wire.PathRelease]
	}
	m.rep = muxReply{m: m, tag: tag, ctx: m.ctx}
	rt.hot(s, &m.rep, body, nil, m.who)
}

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
	if t, ok := renew(m.rdl, m.to.idle); ok {
		m.rdl = t
		_ = m.nc.SetReadDeadline(t)
	}
}

// answer writes (or, during a batch, queues) the answer to tag. g, if not
// nil, is the grant it carries: given back if the write fails.
func (m *muxConn) answer(tag uint32, status int, body []byte, g *sema.Grant) error {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	if m.werr != nil {
		return m.werr
	}
	m.out = wire.AppendMuxAnswer(m.out, tag, status, body)
	if g != nil {
		m.grants = append(m.grants, *g)
	}
	if m.batch {
		return nil
	}
	return m.flushLocked()
}

// flushLocked writes the queued answers without blocking: answers come
// from any goroutine (the log's committer, another connection's release),
// which a client that reads slowly must not hold up. What the socket does
// not take at once is written by a flusher goroutine, which waits for it.
// Callers hold m.wmu.
func (m *muxConn) flushLocked() error {
	if len(m.out) == 0 || m.werr != nil || m.flushing {
		return m.werr
	}
	n := 0
	var err error
	if m.rc != nil {
		if cerr := m.rc.Control(func(fd uintptr) { n, err = rawio.Write(int(fd), m.out) }); cerr != nil {
			err = cerr
		}
		if err == syscall.EAGAIN {
			n, err = 0, nil
		}
		if err != nil {
			m.failWrite(err)
			return err
		}
	}
	if n == len(m.out) {
		m.out, m.grants = m.out[:0], m.grants[:0]
		return nil
	}
	m.out = m.out[:copy(m.out, m.out[n:])]
	m.flushing = true
	go m.flush()
	return nil
}

// flush writes the queued answers, waiting for the socket, until none
// are left.
func (m *muxConn) flush() {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	for len(m.out) > 0 && m.werr == nil {
		b, gs := m.out, m.grants
		m.out, m.grants = m.spare[:0], m.spareGrants[:0]
		m.armWrite(time.Now())
		m.wmu.Unlock()
		_, err := m.w.Write(b)
		m.wmu.Lock()
		m.spare, m.spareGrants = b[:0], gs[:0]
		if err != nil {
			m.grants = append(m.grants, gs...)
			m.failWrite(err)
		}
	}
	m.flushing = false
	m.flushed.Broadcast()
}

// failWrite breaks the connection after a failed write and gives back the
// grants not written. Callers hold m.wmu.
func (m *muxConn) failWrite(err error) {
	m.werr = err
	_ = m.nc.Close()
	for _, g := range m.grants {
		go m.s.giveBack(g)
	}
	m.out, m.grants = m.out[:0], m.grants[:0]
}

// armWrite renews the write deadline if needed. Callers hold m.wmu (or
// are the only writer).
func (m *muxConn) armWrite(now time.Time) {
	if t, ok := rearm.Deadline(m.wdl, m.to.write, now); ok {
		m.wdl = t
		_ = m.nc.SetWriteDeadline(t)
	}
}

// addPoll registers a long poll under tag; a tag in use is a protocol
// error. Called by the conn goroutine only.
func (m *muxConn) addPoll(tag uint32, w muxWaiter) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.polls[tag]; dup {
		m.bad = fmt.Errorf("%w: tag %d is in use", wire.ErrMuxFrame, tag)
		return m.bad
	}
	if len(m.polls) >= wire.MuxMaxCalls {
		return fmt.Errorf("%w: more than %d long polls on one sema-mux connection", sema.ErrInvalidArgument, wire.MuxMaxCalls)
	}
	m.polls[tag] = w
	m.wg.Add(1)
	return nil
}

// dropPoll forgets tag's poll.
func (m *muxConn) dropPoll(tag uint32) {
	m.mu.Lock()
	delete(m.polls, tag)
	m.mu.Unlock()
}

// end ends the connection: every poll still queued is dequeued and
// answered (cancelled, or closed if the server is closing), the answers
// in progress are written (a grant that cannot be is given back), and the
// connection closes.
func (m *muxConn) end(err error) {
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrDeadlineExceeded) {
		m.s.log.Debug("sema serve: sema-mux connection ends", "err", err)
	}
	cause := errMuxCancelled
	if m.s.closed.Load() {
		cause = errShuttingDown
	}
	m.mu.Lock()
	ws := make([]muxWaiter, 0, len(m.polls))
	for _, w := range m.polls {
		ws = append(ws, w)
	}
	m.mu.Unlock()
	for _, w := range ws {
		w.stop(cause)
	}
	m.wg.Wait()
	m.cancel()
	m.wmu.Lock()
	_ = m.flushLocked()
	for m.flushing {
		m.flushed.Wait()
	}
	m.wmu.Unlock()
	_ = m.nc.Close()
}

// shutdown ends the polls with "closed" and wakes the read loop, which
// then ends the connection. Called with s.connMu held.
func (m *muxConn) shutdown() {
	m.mu.Lock()
	m.closing = true
	m.rdl = aLongTimeAgo
	_ = m.nc.SetReadDeadline(aLongTimeAgo)
	for _, w := range m.polls {
		go w.stop(errShuttingDown)
	}
	m.mu.Unlock()
}

func (m *muxConn) kill() { m.nc.Close() }

// muxReply answers one call of a sema-mux connection.
type muxReply struct {
	m   *muxConn
	tag uint32
	ctx context.Context // the connection's, or a goroutine poll's
}

func (r *muxReply) gone() context.Context { return r.ctx }

func (r *muxReply) send(status int, body []byte, _ bool) error {
	return r.m.answer(r.tag, status, body, nil)
}

// sendGrant is send for an answer that carries a grant (deliver).
func (r *muxReply) sendGrant(status int, body []byte, g *sema.Grant) error {
	return r.m.answer(r.tag, status, body, g)
}

// beat writes nothing: sema-mux has no heartbeats (a client that leaves
// closes the connection).
func (r *muxReply) beat(bool) error { return nil }

func (r *muxReply) extend(time.Time) {}

// await runs a long poll over a backend other than the embedded store on
// a goroutine of its own, dequeued (its context ends) by a cancel, the
// end of the connection or the server's shutdown.
func (r *muxReply) await(poll func(replier) bool) bool {
	m := r.m
	ctx, cancel := context.WithCancelCause(m.ctx)
	gp := goPoll(cancel)
	if err := m.addPoll(r.tag, gp); err != nil {
		cancel(nil)
		if m.bad == nil {
			return m.s.failTo(r, routeAcquire, err, m.who, false)
		}
		return false
	}
	go func() {
		defer m.wg.Done()
		ok := poll(&muxReply{m: m, tag: r.tag, ctx: ctx})
		m.dropPoll(r.tag)
		if !ok { // nothing went out (the client cancelled or left)
			_ = m.answer(r.tag, wire.MuxStatusCancelled, cancelledBody, nil)
		}
		cancel(nil)
	}()
	return true
}

// goPoll is a poll on its own goroutine: stop ends its context. A
// shutdown does not: waitGrant answers "closed" itself.
type goPoll context.CancelCauseFunc

func (g goPoll) stop(cause error) {
	if cause != errShuttingDown {
		g(cause)
	}
}
