package remote

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sema-dev/sema/internal/rawio"
)

// Pipelined releases.
//
// A release never waits on the server (no queue, and its answer does not
// wait for an fsync), so the backend sends releases that overlap another
// (roundTrip) over a few pipelined connections instead of one pooled
// connection per call: a caller appends its request to a pipe's buffer,
// and whichever caller finds the pipe not writing writes everything
// buffered in one write(2); one goroutine per pipe reads the answers, in
// order, and hands each to its caller. Under concurrency a burst of
// releases then costs one write and one read on either side, not one each:
// the server holds the answers of pipelined requests and writes them
// together (internal/server/h1write.go).
//
// Each call has a deadline; a pipe's deadline is the earliest of its
// calls'. If it passes with that call unanswered, the pipe is broken and
// every call in it fails (the core retries a release that failed for a
// transient reason, with the same lease ID, until its own deadline). Calls
// that were sent but got no byte of an answer before the server closed or
// reset the connection (an idle pipe, a server closing or restarting) are
// sent again on a new pipe, at most twice, as on a stale pooled
// connection; after any other failure (a malformed answer) they fail.

// nPipes is the number of pipes of a backend; calls take them in turn.
const nPipes = 2

type pipes struct {
	p      *h1Pool
	next   atomic.Uint32
	closed atomic.Bool
	dialed atomic.Int64 // connections dialed (for tests)
	slots  [nPipes]pipeSlot
}

type pipeSlot struct {
	mu sync.Mutex
	pc *pipeConn // the current pipe, nil before the first call
}

type pipeConn struct {
	ps *pipes
	nc net.Conn
	rw io.ReadWriter // nc, or raw reads and writes of its socket (rawio)
	br *bufio.Reader

	mu      sync.Mutex
	wbuf    []byte // requests not written yet
	spare   []byte
	writing bool        // a caller is writing wbuf
	calls   []*pipeCall // awaiting answers, oldest first, from head
	head    int
	dl      time.Time // the connection's deadline as set
	err     error     // broken: no more calls
}

type pipeCall struct {
	done     chan struct{} // receives once the call ends
	deadline time.Time
	out      []byte
	status   int
	err      error
}

var pipeCalls = sync.Pool{New: func() any { return &pipeCall{done: make(chan struct{}, 1)} }}

// errPipeClosed ends the calls that were sent behind an answer that
// closed the connection: the server read none of them.
var errPipeClosed = errors.New("the server closed the pipelined connection")

// do sends req (a whole HTTP/1.1 request) on a pipe and reads the
// answer's body into out, within deadline.
func (ps *pipes) do(req []byte, deadline time.Time, out []byte) (int, []byte, error) {
	slot := &ps.slots[ps.next.Add(1)%nPipes]
	for attempt := 0; ; attempt++ {
		pc, err := slot.get(ps, deadline)
		if err != nil {
			return 0, out, err
		}
		call := pipeCalls.Get().(*pipeCall)
		call.deadline, call.out, call.status, call.err = deadline, out, 0, nil
		pc.send(call, req)
		<-call.done
		status, res, err := call.status, call.out, call.err
		call.out = nil
		pipeCalls.Put(call)
		if errors.Is(err, errRetry) && attempt < 2 && !ps.closed.Load() {
			out = res
			continue
		}
		return status, res, err
	}
}

// close closes the idle pipes; a pipe with calls in flight closes after
// its last answer.
func (ps *pipes) close() {
	ps.closed.Store(true)
	for i := range ps.slots {
		s := &ps.slots[i]
		s.mu.Lock()
		if pc := s.pc; pc != nil {
			pc.closeIfIdle()
		}
		s.mu.Unlock()
	}
}

// get returns the slot's pipe, or dials a new one if it has none or it
// broke.
func (s *pipeSlot) get(ps *pipes, deadline time.Time) (*pipeConn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pc := s.pc; pc != nil {
		pc.mu.Lock()
		ok := pc.err == nil
		pc.mu.Unlock()
		if ok {
			return pc, nil
		}
	}
	if ps.closed.Load() {
		return nil, net.ErrClosed
	}
	d := ps.p.dialer
	d.Deadline = deadline
	nc, err := d.Dial("tcp", ps.p.addr)
	if err != nil {
		return nil, err
	}
	ps.dialed.Add(1)
	pc := &pipeConn{ps: ps, nc: nc, rw: nc}
	if rw, ok := rawio.New(nc); ok {
		pc.rw = rw
	}
	pc.br = bufio.NewReaderSize(pc.rw, 4096)
	s.pc = pc
	go pc.readLoop()
	return pc, nil
}

// send queues call and its request; the caller then waits on call.done.
func (pc *pipeConn) send(call *pipeCall, req []byte) {
	pc.mu.Lock()
	if pc.err != nil {
		err := pc.err
		pc.mu.Unlock()
		call.err = fmt.Errorf("%w: %w", errRetry, err)
		call.done <- struct{}{}
		return
	}
	pc.calls = append(pc.calls, call)
	if pc.dl.IsZero() || call.deadline.Before(pc.dl) {
		pc.dl = call.deadline
		_ = pc.nc.SetDeadline(pc.dl)
	}
	pc.wbuf = append(pc.wbuf, req...)
	if pc.writing {
		pc.mu.Unlock() // the writer sends it with what it finds next
		return
	}
	pc.writing = true
	for len(pc.wbuf) > 0 && pc.err == nil {
		b := pc.wbuf
		pc.wbuf = pc.spare[:0]
		pc.mu.Unlock()
		_, err := pc.rw.Write(b)
		pc.mu.Lock()
		pc.spare = b[:0]
		if err != nil {
			pc.failLocked(err)
		}
	}
	pc.wbuf = pc.wbuf[:0]
	pc.writing = false
	pc.mu.Unlock()
}

// readLoop reads the answers and hands each to its call, until the pipe
// breaks.
func (pc *pipeConn) readLoop() {
	for {
		if _, err := pc.br.Peek(1); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && pc.rearm() {
				continue
			}
			pc.fail(err)
			return
		}
		pc.mu.Lock()
		if pc.head == len(pc.calls) {
			pc.failLocked(errors.New("remote: an answer to no request"))
			pc.mu.Unlock()
			return
		}
		call := pc.calls[pc.head]
		pc.calls[pc.head] = nil
		if pc.head++; pc.head == len(pc.calls) {
			pc.calls, pc.head = pc.calls[:0], 0
		}
		pc.mu.Unlock()
		// Some of this answer has arrived: the call is never sent again.
		status, body, keep, err := readResponse(pc.br, call.out)
		call.status, call.out, call.err = status, body, err
		call.done <- struct{}{}
		switch {
		case err != nil:
			pc.fail(err)
			return
		case !keep:
			pc.fail(errPipeClosed)
			return
		}
		if pc.ps.closed.Load() && pc.closeIfIdle() {
			return
		}
	}
}

// rearm handles the connection's deadline: if a call's has passed, it
// reports false (the pipe breaks); else it sets the earliest deadline of
// the calls left, or none.
func (pc *pipeConn) rearm() bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	var dl time.Time
	for _, c := range pc.calls[pc.head:] {
		if dl.IsZero() || c.deadline.Before(dl) {
			dl = c.deadline
		}
	}
	if !dl.IsZero() && !time.Now().Before(dl) {
		return false
	}
	pc.dl = dl
	_ = pc.nc.SetDeadline(dl)
	return true
}

// closeIfIdle closes the pipe (the backend closed) if no call is in it,
// and reports whether it did.
func (pc *pipeConn) closeIfIdle() bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	idle := pc.head == len(pc.calls) && !pc.writing
	if idle {
		pc.failLocked(net.ErrClosed)
	}
	return idle
}

func (pc *pipeConn) fail(err error) {
	pc.mu.Lock()
	pc.failLocked(err)
	pc.mu.Unlock()
}

// failLocked breaks the pipe: it closes the connection and ends the calls
// waiting for an answer (none of which got a byte of one). They are to be
// sent again (errRetry) if the server closed or reset the connection.
func (pc *pipeConn) failLocked(err error) {
	if pc.err == nil {
		pc.err = err
		_ = pc.nc.Close()
	}
	retry := errors.Is(err, io.EOF) || errors.Is(err, errPipeClosed) ||
		(isReset(err) && !errors.Is(err, net.ErrClosed))
	for i := pc.head; i < len(pc.calls); i++ {
		c := pc.calls[i]
		pc.calls[i] = nil
		if retry {
			c.err = fmt.Errorf("%w: %w", errRetry, err)
		} else {
			c.err = err
		}
		c.done <- struct{}{}
	}
	pc.calls, pc.head = pc.calls[:0], 0
}
