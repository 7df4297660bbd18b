package remote

import (
	"io"
	"net"
	"syscall"

	"github.com/sema-dev/sema/internal/rawio"
)

// sendReader is what a connection's bufio.Reader reads from. It can send a
// request and wait for its answer without the read(2) that Go's net.Conn
// would make first, which on loopback almost always finds nothing yet
// (EAGAIN) and only then parks the goroutine: one syscall per request
// fewer.
//
// How that stays correct: Go's poller is edge-triggered and clears a
// socket's "readable" flag when a raw read starts (RawConn.Read). The
// request is written from inside that raw read, after the flag was
// cleared, so any answer byte that arrives after the write sets the flag
// again and wakes the wait; nothing can have arrived before the write
// (this client speaks first and reads every answer to its end before the
// next request; a connection with unread bytes does not take this path).
// A spurious wake-up (the flag set by something older) just reads EAGAIN
// and waits again, as net.Conn does.
type sendReader struct {
	nc  net.Conn
	raw *rawio.Conn // nil: no raw access (plain net.Conn reads)
	req []byte      // to write before the next read, or nil

	// The raw exchange in progress (step, made once: no closure per call).
	step     func(fd uintptr) bool
	p        []byte
	n, sent  int
	rerr     error
	werr     error
	fallback bool
}

func newSendReader(nc net.Conn) *sendReader {
	r := &sendReader{nc: nc}
	r.raw, _ = rawio.New(nc)
	r.step = r.rawStep
	return r
}

// errSend marks a failure to write the request (as opposed to reading its
// answer).
type errSend struct{ err error }

func (e *errSend) Error() string { return e.err.Error() }
func (e *errSend) Unwrap() error { return e.err }

// Read reads into p, first sending a pending request if there is one.
func (r *sendReader) Read(p []byte) (int, error) {
	req := r.req
	if req == nil {
		return r.nc.Read(p)
	}
	if r.raw == nil {
		r.req = nil
		if _, err := r.nc.Write(req); err != nil {
			return 0, &errSend{err}
		}
		return r.nc.Read(p)
	}
	r.p, r.n, r.sent, r.rerr, r.werr, r.fallback = p, 0, 0, nil, nil, false
	err := r.raw.RawConn().Read(r.step)
	r.req, r.p = nil, nil
	switch {
	case r.werr != nil:
		return 0, &errSend{r.raw.SyscallError("write", r.werr)}
	case err != nil: // the deadline, or the connection closed
		return 0, err
	case r.fallback:
		if _, err := r.nc.Write(req[r.sent:]); err != nil {
			return 0, &errSend{err}
		}
		return r.nc.Read(p)
	case r.rerr != nil:
		return 0, r.raw.SyscallError("read", r.rerr)
	case r.n <= 0:
		return 0, io.EOF
	}
	return r.n, nil
}

// rawStep is called by RawConn.Read: first it writes the request (and asks
// to wait for readability), then it reads; false means "wait".
func (r *sendReader) rawStep(fd uintptr) bool {
	if r.sent < len(r.req) {
		for r.sent < len(r.req) {
			w, err := rawio.Write(int(fd), r.req[r.sent:])
			if w > 0 {
				r.sent += w
			}
			if err == syscall.EAGAIN || (err == nil && w <= 0) {
				// The socket's buffer is full: the rest goes out through
				// net.Conn, which waits for room (and its deadline).
				r.fallback = true
				return true
			}
			if err != nil {
				r.werr = err
				return true
			}
		}
		return false // wait for the answer, with no read that finds nothing
	}
	n, err := rawio.Read(int(fd), r.p)
	if err == syscall.EAGAIN {
		return false
	}
	r.n, r.rerr = n, err
	return true
}
