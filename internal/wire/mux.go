package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The multiplexed transport, "sema-mux/1".
//
// A client that makes many calls at once (a process with many goroutines
// taking locks) may carry all its acquires, renewals and releases on one
// connection instead of one HTTP/1.1 connection per call in flight. It
// asks with
//
//	GET /v1/mux HTTP/1.1
//	Connection: Upgrade
//	Upgrade: sema-mux/1
//	Authorization: Bearer TOKEN
//
// and, on "101 Switching Protocols", the connection carries frames from
// then on. The token of the upgrade is the caller of every call on it.
//
// A call is a request frame: a 4-byte length (big-endian, the bytes after
// it), a 4-byte tag the client chooses, a 1-byte op (MuxAcquire, MuxRenew,
// MuxRelease) and the JSON body of the same HTTP call. Its answer is an
// answer frame: a 4-byte length, the call's tag, a 2-byte HTTP status and
// the JSON envelope the HTTP call would get. Answers come in any order (a
// long poll answers when granted); every call gets exactly one. A tag may
// be used again once its call is answered. A long poll has no heartbeats:
// a client that hangs up closes the connection, which dequeues its polls.
//
// A MuxCancel frame (empty body) with the tag of a long poll in flight
// dequeues it: the poll is answered MuxStatusCancelled, or with its grant
// if that came first (the client then gives it back). A client that
// half-closes the connection cancels every poll on it and still reads
// the answers of its calls; the server closes the connection after the
// last one.
//
// The server may also send a notice: an answer frame with tag 0, which no
// call has (a client never uses it), and status MuxStatusNotice. Its body
// is a Notice: a lease of the connection's caller was force-released (its
// next renewal would fail). A client that does not
// know notices drops the frame as the answer of no call.
//
// A malformed frame (a length out of bounds, an unknown op, a tag in use)
// closes the connection: the framing cannot be trusted after it.
const (
	PathMux     = "/v1/mux"
	MuxProtocol = "sema-mux/1"
)

// Ops of request frames.
const (
	MuxAcquire byte = 1 + iota
	MuxRenew
	MuxRelease
	MuxCancel
)

// Frame sizes.
const (
	MuxRequestHead = 9  // length, tag, op
	MuxAnswerHead  = 10 // length, tag, status
	// MuxMaxCalls bounds the calls in flight on one connection; a call
	// beyond it is answered 429 (too_many_waiters).
	MuxMaxCalls = 1 << 16
	// MuxMaxAnswer bounds an answer's body (a lease envelope or an error).
	MuxMaxAnswer = 1 << 20
)

// MuxStatusCancelled answers a long poll dequeued by MuxCancel or by the
// client's half-close (the nginx convention for "client closed request").
const MuxStatusCancelled = 499

// MuxNoticeTag and MuxStatusNotice mark a notice frame (see above).
const (
	MuxNoticeTag    uint32 = 0
	MuxStatusNotice        = 290
)

// Notice is the body of a notice frame.
type Notice struct {
	// Forced: a lease of the connection's caller was force-released.
	Forced *ForcedLease `json:"forced,omitempty"`
}

// ForcedLease names a force-released lease, and who force-released it as
// the server names them.
type ForcedLease struct {
	Name string `json:"name"`
	ID   string `json:"id"`
	By   string `json:"by,omitempty"`
}

// ErrMuxFrame reports a malformed frame.
var ErrMuxFrame = errors.New("malformed sema-mux frame")

// AppendMuxRequest appends a request frame.
func AppendMuxRequest(b []byte, tag uint32, op byte, body []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(MuxRequestHead-4+len(body)))
	b = binary.BigEndian.AppendUint32(b, tag)
	b = append(b, op)
	return append(b, body...)
}

// AppendMuxAnswer appends an answer frame.
func AppendMuxAnswer(b []byte, tag uint32, status int, body []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(MuxAnswerHead-4+len(body)))
	b = binary.BigEndian.AppendUint32(b, tag)
	b = binary.BigEndian.AppendUint16(b, uint16(status))
	return append(b, body...)
}

// ParseMuxRequest parses the request frame at the start of p. n is 0 if p
// does not hold all of it yet; err reports a malformed frame.
func ParseMuxRequest(p []byte) (tag uint32, op byte, body []byte, n int, err error) {
	if len(p) < MuxRequestHead {
		return 0, 0, nil, 0, nil
	}
	size := binary.BigEndian.Uint32(p)
	if size < MuxRequestHead-4 || size > MuxRequestHead-4+MaxBodyBytes {
		return 0, 0, nil, 0, fmt.Errorf("%w: request length %d", ErrMuxFrame, size)
	}
	op = p[8]
	if op < MuxAcquire || op > MuxCancel {
		return 0, 0, nil, 0, fmt.Errorf("%w: op %d", ErrMuxFrame, op)
	}
	n = 4 + int(size)
	if len(p) < n {
		return 0, 0, nil, 0, nil
	}
	return binary.BigEndian.Uint32(p[4:]), op, p[MuxRequestHead:n], n, nil
}

// ParseMuxAnswerHead parses the head of an answer frame: the body that
// follows is size bytes long.
func ParseMuxAnswerHead(h []byte) (tag uint32, status int, size int, err error) {
	n := binary.BigEndian.Uint32(h)
	if n < MuxAnswerHead-4 || n > MuxAnswerHead-4+MuxMaxAnswer {
		return 0, 0, 0, fmt.Errorf("%w: answer length %d", ErrMuxFrame, n)
	}
	status = int(binary.BigEndian.Uint16(h[8:]))
	if status < 100 || status > 599 {
		return 0, 0, 0, fmt.Errorf("%w: status %d", ErrMuxFrame, status)
	}
	return binary.BigEndian.Uint32(h[4:]), status, int(n) - (MuxAnswerHead - 4), nil
}
