// Package rawio reads and writes nonblocking sockets with raw system
// calls, which the Go scheduler does not hear about.
//
// syscall.Read and syscall.Write tell the scheduler that the goroutine
// enters a system call that may block (entersyscall): if all of the
// process's Ps were idle, that wakes the runtime's monitor thread (sysmon),
// which then polls every 20 µs for at least a millisecond. On a server
// that answers each request with one write(2) and then idles until the
// next, that polling cost about a tenth of the server's CPU (perf, the
// hot-name benchmark of bench/netbench). A read or write of a nonblocking
// socket never blocks (it returns EAGAIN instead), so it needs none of
// that: this package makes such calls with syscall.RawSyscall.
//
// Only ever use it on file descriptors in nonblocking mode (the ones a
// syscall.RawConn of a net.Conn passes to its callbacks). Under the race
// detector, and on systems other than Linux, the calls go through
// syscall.Read and syscall.Write (which tell the detector about the memory
// the kernel reads and writes).
package rawio

import (
	"io"
	"net"
	"os"
	"syscall"
)

// Read is read(2) of a nonblocking fd; it retries on EINTR.
func Read(fd int, p []byte) (int, error) { return retry(read, fd, p) }

// Write is one write(2) to a nonblocking fd; it retries on EINTR. It may
// write less than p (a full socket buffer: then err is EAGAIN or n < len(p)).
func Write(fd int, p []byte) (int, error) { return retry(write, fd, p) }

func retry(call func(int, []byte) (int, error), fd int, p []byte) (int, error) {
	for {
		n, err := call(fd, p)
		if err != syscall.EINTR {
			return n, err
		}
	}
}

// Conn reads and writes the socket of a net.Conn with raw system calls,
// inside its syscall.RawConn's Read and Write, which wait for the poller
// (and honour the connection's deadlines) when a call returns EAGAIN.
// Errors are the net.Conn's kinds: *net.OpError, io.EOF.
type Conn struct {
	nc net.Conn
	rc syscall.RawConn
}

// New returns a Conn of nc, or false if nc has no raw connection.
func New(nc net.Conn) (*Conn, bool) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, false
	}
	return &Conn{nc: nc, rc: rc}, true
}

// RawConn returns the connection's syscall.RawConn.
func (c *Conn) RawConn() syscall.RawConn { return c.rc }

// Read reads what the socket holds into p, waiting until it holds some.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var rerr error
	err := c.rc.Read(func(fd uintptr) bool {
		n, rerr = Read(int(fd), p)
		return rerr != syscall.EAGAIN
	})
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case rerr != nil:
		return 0, c.SyscallError("read", rerr)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of b.
func (c *Conn) Write(b []byte) (int, error) {
	total := len(b)
	var werr error
	err := c.rc.Write(func(fd uintptr) bool {
		for len(b) > 0 {
			n, err := Write(int(fd), b)
			if n > 0 {
				b = b[n:]
			}
			switch {
			case err == syscall.EAGAIN:
				return false // wait until writable
			case err != nil:
				werr = os.NewSyscallError("write", err)
				return true
			case n <= 0:
				werr = io.ErrShortWrite
				return true
			}
		}
		return true
	})
	if err == nil {
		err = werr
	}
	if err != nil {
		return total - len(b), c.opError("write", err)
	}
	return total, nil
}

// SyscallError wraps errno, the error of a raw op ("read" or "write") on
// c's socket, as net.Conn would.
func (c *Conn) SyscallError(op string, errno error) error {
	return c.opError(op, os.NewSyscallError(op, errno))
}

// opError wraps err as net.Conn would (RawConn's own errors are
// *net.OpError of op "raw-read" or "raw-write": their cause is kept).
func (c *Conn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: c.nc.LocalAddr().Network(), Source: c.nc.LocalAddr(), Addr: c.nc.RemoteAddr(), Err: err}
}
