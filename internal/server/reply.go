package server

import (
	"context"
	"net/http"
	"time"
)

// replier is where the answer of a hot route (acquire, renew, release)
// goes: net/http's ResponseWriter (httpReplier), or a connection the
// server has taken over (h1conn.go). The handlers, the long-poll and the
// delivery of grants are written once against it.
type replier interface {
	// gone ends when the client has hung up (a long poll is dequeued, a
	// grant not yet written is given back).
	gone() context.Context
	// send writes a complete JSON answer and flushes it. committed: the
	// status line is out already (after heartbeats); only the body is
	// written.
	send(status int, body []byte, committed bool) error
	// beat writes one heartbeat space and flushes it, committing a 200
	// first if first is set.
	beat(first bool) error
	// extend lets the connection's read and write deadlines reach t (a
	// long poll outlives the ordinary timeouts).
	extend(t time.Time)
	// await runs a long poll, with the replier it must answer through,
	// and reports whether it answered (or, on a taken-over connection,
	// that it started on its own goroutine).
	await(poll func(replier) bool) bool
}

// httpReplier answers through net/http.
type httpReplier struct {
	w http.ResponseWriter
	r *http.Request
}

func (h httpReplier) gone() context.Context { return h.r.Context() }

func (h httpReplier) send(status int, body []byte, committed bool) error {
	if err := writeBody(h.w, status, body, committed); err != nil {
		return err
	}
	return flush(h.w)
}

func (h httpReplier) beat(first bool) error {
	if first {
		h.w.Header()["Content-Type"] = jsonType
		h.w.WriteHeader(http.StatusOK)
	}
	if _, err := h.w.Write([]byte{' '}); err != nil {
		return err
	}
	return flush(h.w)
}

func (h httpReplier) await(poll func(replier) bool) bool { return poll(h) }

func (h httpReplier) extend(t time.Time) {
	rc := http.NewResponseController(h.w)
	_ = rc.SetReadDeadline(t)
	_ = rc.SetWriteDeadline(t)
}
