package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/wire"
)

// maxResponse bounds what one answer may weigh (a List of many names).
const maxResponse = 256 << 20

// Shared, read-only header values.
var (
	jsonContentType = []string{"application/json"}
	acceptJSON      = []string{"application/json"}
)

// buffer is a pooled response buffer.
type buffer struct{ b []byte }

var bufPool = sync.Pool{New: func() any { return &buffer{b: make([]byte, 0, 1024)} }}

func getBuffer() *buffer { return bufPool.Get().(*buffer) }

func putBuffer(b *buffer) {
	if cap(b.b) <= 64<<10 {
		b.b = b.b[:0]
		bufPool.Put(b)
	}
}

// bodyBuffer returns a buffer for a request body. Give it back with
// bodyDone once the call returned.
func (b *Backend) bodyBuffer() *buffer { return getBuffer() }

// bodyDone recycles a request body's buffer. Only the h1 client is known
// to be done with the body when the call returns (it copies the body into
// its request); net/http's transport may still hold it.
func (b *Backend) bodyDone(buf *buffer, body []byte) {
	if b.h1 != nil {
		buf.b = body
		putBuffer(buf)
	}
}

// reply is one answer of the server: its status and body. Release it with
// done.
type reply struct {
	status int
	buf    *buffer
}

func (r reply) body() []byte { return r.buf.b }
func (r reply) done()        { putBuffer(r.buf) }

// endpoint is a request URL and its HTTP/1.1 request target.
type endpoint struct {
	u      *url.URL
	target string // escaped path and query
}

func newEndpoint(u *url.URL) *endpoint { return &endpoint{u: u, target: u.RequestURI()} }

// roundTrip sends one request and reads the whole answer. key, if not
// empty, is sent as Idempotency-Key, which also lets net/http's transport
// replay the request on a stale keep-alive connection (the h1 pool does the
// same). timeout > 0 limits the call (to Config.RequestTimeout, mostly);
// 0 marks a long poll, bounded by the server's cap. Errors are
// transport errors (the caller wraps them in sema.ErrUnavailable).
func (b *Backend) roundTrip(ctx context.Context, method string, ep *endpoint, body []byte, key string, timeout time.Duration) (reply, error) {
	bounded := timeout > 0
	if b.h1 != nil {
		var deadline time.Time
		if bounded {
			// A context that ends sooner bounds the call already (the h1
			// client watches it); else the connection's deadline does.
			deadline = time.Now().Add(timeout)
			if dl, ok := ctx.Deadline(); ok && !dl.After(deadline) && ctx.Done() != nil {
				deadline = time.Time{}
			}
		}
		var drain time.Duration
		if ep == b.uAcquire {
			drain = b.giveBackTimeout()
		}
		if op := b.muxOp(ep); op != 0 && !b.noMux {
			buf := getBuffer()
			status, out, err, ok := b.mux.do(ctx, op, body, deadline, drain > 0 && !bounded, drain, buf.b[:0])
			if ok {
				return b.h1Reply(status, buf, out, err)
			}
			putBuffer(buf)
		}
		buf := getBuffer()
		status, out, err := b.h1.do(ctx, method, ep.target, b.h1hdr, body, key, deadline, drain, drain > 0 && !bounded, buf.b[:0])
		return b.h1Reply(status, buf, out, err)
	}
	if bounded {
		var cancel context.CancelFunc
		ctx, cancel = bound(ctx, timeout)
		defer cancel()
	} else if ep == b.uAcquire {
		// A long poll: Close ends it (the h1 pool does this itself).
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(b.closeCtx, cancel)()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	// An empty URL parses for free; the prebuilt one is set below.
	req, err := http.NewRequestWithContext(ctx, method, "", rd)
	if err != nil {
		return reply{}, err
	}
	req.URL = ep.u
	if body != nil {
		req.Header["Content-Type"] = jsonContentType
	}
	req.Header["Accept"] = acceptJSON
	if b.auth != nil {
		req.Header["Authorization"] = b.auth
	}
	if key != "" {
		req.Header["Idempotency-Key"] = []string{key}
	}
	var resp *http.Response
	if b.owned != nil {
		resp, err = b.owned.RoundTrip(req)
	} else {
		resp, err = b.hc.Do(req)
	}
	if err != nil {
		return reply{}, err
	}
	buf := getBuffer()
	buf.b, err = readAll(resp.Body, buf.b[:0])
	resp.Body.Close()
	if err != nil {
		putBuffer(buf)
		return reply{}, err
	}
	if !b.reached.Load() {
		b.reached.Store(true)
	}
	return reply{status: resp.StatusCode, buf: buf}, nil
}

// muxOp is the sema-mux op of a call to ep, or 0 (not a hot call).
func (b *Backend) muxOp(ep *endpoint) byte {
	switch ep {
	case b.uAcquire:
		return wire.MuxAcquire
	case b.uRenew:
		return wire.MuxRenew
	case b.uRelease:
		return wire.MuxRelease
	}
	return 0
}

// h1Reply ends a call of the h1 client: the answer's body out, read into
// buf's bytes, or err.
func (b *Backend) h1Reply(status int, buf *buffer, out []byte, err error) (reply, error) {
	buf.b = out
	if err != nil {
		putBuffer(buf)
		return reply{}, err
	}
	if !b.reached.Load() {
		b.reached.Store(true)
	}
	return reply{status: status, buf: buf}, nil
}

var errTooLarge = errors.New("answer larger than 256 MiB")

// readAll reads r to EOF into b.
func readAll(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			if len(b) >= maxResponse {
				return b, errTooLarge
			}
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// bound limits a non-waiting call to timeout unless ctx ends sooner.
func bound(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= timeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, timeout)
}

// leaseCall posts body to u and decodes the Envelope, whatever the status,
// into *out (whose name, ID and owner are hints: see fastLease). found says
// whether the answer held a lease (release's holds none); an error wraps a
// sema sentinel.
func (b *Backend) leaseCall(ctx context.Context, op string, ep *endpoint, name string, body []byte, key string, timeout time.Duration, out *wire.Lease) (found bool, err error) {
	if sema.ValidateID(key) != nil {
		key = "" // not a header value: the server will reject the id anyway
	}
	r, err := b.roundTrip(ctx, http.MethodPost, ep, body, key, timeout)
	if err != nil {
		return false, netError(op, name, err)
	}
	defer r.done()
	return decodeLease(op, name, r.status, r.body(), out)
}

// decodeLease decodes an Envelope into *out (see leaseCall). Heartbeat
// spaces before the JSON are whitespace to the decoder; an error in the
// body wins over the status.
func decodeLease(op, name string, status int, body []byte, out *wire.Lease) (found bool, err error) {
	if status == http.StatusOK {
		if empty, ok := fastLease(body, out); ok {
			return !empty, nil
		}
	}
	var env wire.Envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return false, badAnswer(op, name, status, body)
	}
	if env.Error != nil {
		return false, apiError(op, name, env.Error)
	}
	if status != http.StatusOK {
		return false, badAnswer(op, name, status, body)
	}
	if env.Lease == nil {
		*out = wire.Lease{}
		return false, nil
	}
	*out = *env.Lease
	return true, nil
}

// callJSON sends a request without a lease and decodes a successful
// answer into out, or the error of an Envelope.
func (b *Backend) callJSON(ctx context.Context, op, name, method string, ep *endpoint, body []byte, out any) error {
	r, err := b.roundTrip(ctx, method, ep, body, "", b.cfg.RequestTimeout)
	if err != nil {
		return netError(op, name, err)
	}
	defer r.done()
	if r.status != http.StatusOK {
		var env wire.Envelope
		if json.Unmarshal(r.body(), &env) == nil && env.Error != nil {
			return apiError(op, name, env.Error)
		}
		return badAnswer(op, name, r.status, r.body())
	}
	if err := json.Unmarshal(r.body(), out); err != nil {
		return badAnswer(op, name, r.status, r.body())
	}
	return nil
}

// netError wraps a transport error. The error keeps the context's error in
// its chain, so errors.Is(err, context.DeadlineExceeded) works.
func netError(op, name string, err error) error {
	if name == "" {
		return fmt.Errorf("remote: %s: %w: %w", op, sema.ErrUnavailable, err)
	}
	return fmt.Errorf("remote: %s %q: %w: %w", op, name, sema.ErrUnavailable, err)
}

// badAnswer reports an answer that is not the API's (a proxy's error page,
// a truncated body).
func badAnswer(op, name string, status int, body []byte) error {
	const max = 120
	snippet := bytes.TrimSpace(body)
	if len(snippet) > max {
		snippet = snippet[:max]
	}
	return fmt.Errorf("remote: %s %q: %w: unexpected answer (HTTP %d): %q",
		op, name, sema.ErrUnavailable, status, snippet)
}
