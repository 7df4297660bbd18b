package server

import (
	"io"
	"net"
	"net/http"
	"time"

	"github.com/sema-dev/sema/internal/rearm"
)

// Deadlines and writes of taken-over connections (h1conn.go).

// setReadDeadline sets (and records) the read deadline.
func (c *h1conn) setReadDeadline(t time.Time) {
	c.mu.Lock()
	c.setReadDeadlineLocked(t)
	c.mu.Unlock()
}

func (c *h1conn) setReadDeadlineLocked(t time.Time) {
	c.rdl = t
	_ = c.nc.SetReadDeadline(t)
}

// renew is rearm.Deadline from now.
func renew(dl time.Time, d time.Duration) (time.Time, bool) {
	return rearm.Deadline(dl, d, time.Now())
}

// linger lets the client read an answer sent before the end of its body
// (413): closing a socket with unread data would reset the connection,
// losing the answer. As net/http does, the write side is closed first and
// what the client still sends is read and dropped for a short while.
func (c *h1conn) linger() {
	if tc, ok := c.nc.(*net.TCPConn); ok && tc.CloseWrite() == nil {
		c.setReadDeadline(time.Now().Add(500 * time.Millisecond))
		_, _ = io.CopyN(io.Discard, c.br, 4<<20)
	}
}

// writeRaw writes a canned answer, ignoring errors (the connection closes).
func (c *h1conn) writeRaw(s string) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.writeOut([]byte(s), time.Now())
}

// Answers of pipelined requests.
//
// A client may send several requests before it reads an answer (HTTP/1.1
// pipelining). An answer to one
// of them that needs no give-back if it is not delivered (any but an
// acquire's) is then kept in c.pend while the reader holds more of the
// next request, and goes out with the next answer in one write(2): so a
// burst of pipelined releases costs one write, not one each. Every write
// sends c.pend first, and the connection's goroutine flushes it before it
// waits for more bytes (serveRaw), so answers keep their order and none
// is held while the client waits for it.

// writeOut writes b, after the answers held in c.pend. Callers hold c.wmu.
func (c *h1conn) writeOut(b []byte, now time.Time) error {
	if len(c.pend) > 0 {
		c.pend = append(c.pend, b...)
		b = c.pend
		c.pend = c.pend[:0]
	}
	c.armWriteAt(now)
	_, err := c.w.Write(b)
	return err
}

// flushPend writes the answers held in c.pend, if any; a failed write
// closes the connection (its goroutine then sees the error on its read).
func (c *h1conn) flushPend() {
	c.wmu.Lock()
	if len(c.pend) > 0 {
		if err := c.writeOut(nil, time.Now()); err != nil {
			_ = c.nc.Close()
		}
	}
	c.wmu.Unlock()
}

// writeLocked writes one answer with one write(2), or, if batch, keeps it
// in c.pend (see writeOut). Callers hold c.wmu.
func (c *h1conn) writeLocked(status int, body []byte, committed bool, extra string, closeAfter, batch bool) error {
	b := c.out[:0]
	now := time.Now() // one clock reading for the Date and the deadline
	if committed {
		b = appendChunk(b, body)
		b = append(b, "0\r\n\r\n"...)
	} else {
		b = appendStatus(b, status)
		b = append(b, "Content-Type: application/json\r\nDate: "...)
		b = append(b, httpDateAt(now)[0]...)
		b = append(b, "\r\nContent-Length: "...)
		b = append(b, contentLength(len(body))[0]...)
		b = append(b, "\r\n"...)
		b = append(b, extra...)
		if closeAfter {
			b = append(b, "Connection: close\r\n"...)
		}
		b = append(b, "\r\n"...)
		b = append(b, body...)
	}
	if cap(b) <= 8192 {
		c.out = b
	}
	if batch && !closeAfter && len(c.pend)+len(b) <= maxPend {
		c.pend = append(c.pend, b...)
		return nil
	}
	return c.writeOut(b, now)
}

// maxPend bounds the answers held in c.pend.
const maxPend = 16 << 10

// armWriteAt renews the write deadline if needed, now being the time.
// Callers hold c.wmu.
func (c *h1conn) armWriteAt(now time.Time) {
	if t, ok := rearm.Deadline(c.wdl, c.to.write, now); ok {
		c.wdl = t
		_ = c.nc.SetWriteDeadline(t)
	}
}

func appendStatus(b []byte, status int) []byte {
	b = append(b, "HTTP/1.1 "...)
	b = append(b, contentLength(status)[0]...)
	b = append(b, ' ')
	b = append(b, http.StatusText(status)...)
	return append(b, "\r\n"...)
}

func appendChunk(b, p []byte) []byte {
	const hex = "0123456789abcdef"
	var size [16]byte
	i := len(size)
	for n := len(p); ; n >>= 4 {
		i--
		size[i] = hex[n&0xf]
		if n < 16 {
			break
		}
	}
	b = append(b, size[i:]...)
	b = append(b, "\r\n"...)
	b = append(b, p...)
	return append(b, "\r\n"...)
}

func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b
	}
	return make([]byte, 0, n)
}
