package remote

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/sema-dev/sema/internal/rearm"
	"github.com/sema-dev/sema/internal/wire"
)

// One sema-mux connection: calls go out through one buffer, written by
// whichever caller finds nobody writing; answers come back through one
// reader, which hands each to its caller by tag (mux.go says more).

type muxConn struct {
	t  *muxTransport
	nc net.Conn
	br *bufio.Reader

	mu      sync.Mutex
	wbuf    []byte // frames not written yet
	spare   []byte
	writing bool
	corked  bool                // the reader hands over answers: it writes after (readLoop)
	wdl     time.Time           // the write deadline set
	calls   map[uint32]*muxCall // awaiting answers
	next    uint32              // the last tag used
	err     error               // broken: no more calls
}

type muxCall struct {
	done   chan struct{} // receives once answered or failed
	status int
	out    []byte
	err    error
}

var muxCalls = sync.Pool{New: func() any { return &muxCall{done: make(chan struct{}, 1)} }}

// send registers call under a new tag and sends its frame.
func (c *muxConn) send(call *muxCall, op byte, body []byte) (uint32, error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return 0, fmt.Errorf("%w: %w", errRetry, c.err)
	}
	if len(c.calls) >= wire.MuxMaxCalls {
		c.mu.Unlock()
		return 0, errMuxOff
	}
	for {
		c.next++
		if _, busy := c.calls[c.next]; !busy && c.next != wire.MuxNoticeTag {
			break
		}
	}
	tag := c.next
	c.calls[tag] = call
	c.wbuf = wire.AppendMuxRequest(c.wbuf, tag, op, body)
	// A release is what other processes' waiters wait for: it goes out
	// at once, with whatever the cork holds.
	c.flushLocked(op == wire.MuxRelease)
	return tag, nil
}

// cancelPoll sends a MuxCancel frame for tag.
func (c *muxConn) cancelPoll(tag uint32) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.wbuf = wire.AppendMuxRequest(c.wbuf, tag, wire.MuxCancel, nil)
	c.flushLocked(false)
}

// flushLocked writes the buffered frames, with those other callers buffer
// meanwhile, unless a caller is writing already (which then writes them)
// or the reader has corked the connection (unless force). Called with c.mu
// held; it unlocks it. A failed write fails the connection.
func (c *muxConn) flushLocked(force bool) {
	if c.writing || c.corked && !force {
		c.mu.Unlock()
		return
	}
	c.writing = true
	for len(c.wbuf) > 0 {
		b := c.wbuf
		c.wbuf = c.spare[:0]
		if t, ok := rearm.Deadline(c.wdl, writeTimeout, time.Now()); ok {
			c.wdl = t
			_ = c.nc.SetWriteDeadline(t)
		}
		c.mu.Unlock()
		_, err := c.nc.Write(b)
		c.mu.Lock()
		c.spare = b[:0]
		if err != nil {
			c.writing = false
			c.mu.Unlock()
			c.fail(err)
			return
		}
	}
	c.writing = false
	c.mu.Unlock()
}

// writeTimeout bounds a write of frames (a server that stopped reading).
const writeTimeout = 30 * time.Second

// wait waits for call's answer. A deadline that passes forgets the call;
// a context that ends forgets it too, or, for a poll, cancels it and
// waits up to drain for its last answer.
func (c *muxConn) wait(ctx context.Context, call *muxCall, tag uint32, deadline time.Time, poll bool, drain time.Duration) error {
	if deadline.IsZero() && ctx.Done() == nil {
		<-call.done
		return nil
	}
	var expired <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-call.done:
		return nil
	case <-expired:
		return c.forget(call, tag, os.ErrDeadlineExceeded)
	case <-ctx.Done():
	}
	if !poll {
		return c.forget(call, tag, context.Cause(ctx))
	}
	c.cancelPoll(tag)
	t := time.NewTimer(drain)
	defer t.Stop()
	select {
	case <-call.done:
		return nil
	case <-t.C:
		return c.forget(call, tag, context.Cause(ctx))
	}
}

// forget gives up on call, unless its answer is being handed over (then
// that is awaited).
func (c *muxConn) forget(call *muxCall, tag uint32, err error) error {
	c.mu.Lock()
	mine := c.calls[tag] == call
	if mine {
		delete(c.calls, tag)
	}
	c.mu.Unlock()
	if !mine {
		<-call.done
		return nil
	}
	return &net.OpError{Op: "read", Net: "tcp", Addr: c.nc.RemoteAddr(), Err: err}
}

// readLoop reads answers and hands each to its call, until the
// connection fails.
//
// While it hands over the answers of one read, the connection is corked:
// the callers it wakes buffer their next frames instead of writing them,
// and once it has let them run (runtime.Gosched) it writes whatever they
// buffered in one write. A goroutine that got a lock and one that got its
// release answered then send their next calls (a release, an acquire)
// together: one write and one read on either side instead of two. The
// cork never outlasts the reader's turn, and the reader never waits for
// the socket while corked.
func (c *muxConn) readLoop() {
	var h [wire.MuxAnswerHead]byte
	corked := false
	uncork := func() {
		runtime.Gosched()
		c.mu.Lock()
		c.corked, corked = false, false
		c.flushLocked(false)
	}
	for {
		if corked && c.br.Buffered() < len(h) {
			uncork()
		}
		if _, err := io.ReadFull(c.br, h[:]); err != nil {
			c.fail(err)
			return
		}
		tag, status, n, err := wire.ParseMuxAnswerHead(h[:])
		if err != nil {
			c.fail(err)
			return
		}
		if tag == wire.MuxNoticeTag && status == wire.MuxStatusNotice {
			if err := c.notice(n); err != nil {
				c.fail(err)
				return
			}
			continue
		}
		c.mu.Lock()
		call := c.calls[tag]
		delete(c.calls, tag)
		if corked && c.br.Buffered() < n {
			c.mu.Unlock()
			uncork()
			c.mu.Lock()
		}
		if !corked {
			c.corked, corked = true, true
		}
		c.mu.Unlock()
		if call == nil { // forgotten
			if _, err := c.br.Discard(n); err != nil {
				c.fail(err)
				return
			}
			continue
		}
		out, err := readN(c.br, call.out[:0], n)
		if err != nil {
			err = fmt.Errorf("%w: %w", errMalformed, err)
		}
		call.out, call.status, call.err = out, status, err
		call.done <- struct{}{}
		if err != nil {
			c.fail(err)
			return
		}
	}
}

// fail breaks the connection and ends every call in flight: with errRetry
// if the server closed or reset it (nothing was answered: sending again is
// safe), else with err.
func (c *muxConn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	calls := c.calls
	c.calls = map[uint32]*muxCall{}
	c.mu.Unlock()
	c.nc.Close()
	t := c.t
	t.mu.Lock()
	if t.conn == c {
		t.conn = nil
	}
	t.mu.Unlock()
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
		err = fmt.Errorf("%w: %w", errRetry, err)
	}
	for _, call := range calls {
		call.err = err
		call.done <- struct{}{}
	}
}

// readN reads n bytes from br, appended to out.
func readN(br *bufio.Reader, out []byte, n int) ([]byte, error) {
	out = slices.Grow(out, n)[:len(out)+n]
	_, err := io.ReadFull(br, out[len(out)-n:])
	return out, err
}

// isReset reports whether err is a connection reset by the peer.
func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

// notice reads the body of a notice frame, n bytes, and hands it to the
// transport's onNotice. A body it cannot decode (a kind of notice of a
// newer server) is skipped.
func (c *muxConn) notice(n int) error {
	b, err := readN(c.br, nil, n)
	if err != nil {
		return fmt.Errorf("%w: %w", errMalformed, err)
	}
	var nt wire.Notice
	if json.Unmarshal(b, &nt) == nil && c.t.onNotice != nil {
		c.t.onNotice(nt)
	}
	return nil
}
