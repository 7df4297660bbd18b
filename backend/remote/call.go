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

// The calls every lock takes (ops) go over sema-mux when the server speaks
// it (mux.go), else as HTTP POSTs; everything else is HTTP. HTTP is
// net/http's.

// An op is one of the calls every lock takes. Over sema-mux it is the op
// of a frame; over HTTP a POST to its path.
type op byte

const (
	opAcquire = op(wire.MuxAcquire)
	opRenew   = op(wire.MuxRenew)
	opRelease = op(wire.MuxRelease)
)

func (o op) String() string {
	switch o {
	case opAcquire:
		return "acquire"
	case opRenew:
		return "renew"
	}
	return "release"
}

func (o op) path() string {
	switch o {
	case opAcquire:
		return wire.PathAcquire
	case opRenew:
		return wire.PathRenew
	}
	return wire.PathRelease
}

// maxResponse bounds what one answer may weigh (a List of many names).
const maxResponse = 256 << 20

// buffer is a pooled buffer, for request bodies and answers.
type buffer struct{ b []byte }

var bufPool = sync.Pool{New: func() any { return &buffer{b: make([]byte, 0, 1024)} }}

func getBuffer() *buffer { return bufPool.Get().(*buffer) }

func putBuffer(b *buffer) {
	if cap(b.b) <= 64<<10 {
		b.b = b.b[:0]
		bufPool.Put(b)
	}
}

// leaseCall makes the call o with body and decodes the Envelope, whatever
// the status, into *out (whose name, ID and owner are hints: see
// wire.ParseLease). found says whether the answer held a lease (release's
// holds none); an error wraps a sema sentinel. timeout > 0 bounds the call
// (to Config.RequestTimeout, mostly); 0 marks a long poll, bounded by the
// server's cap.
func (b *Backend) leaseCall(ctx context.Context, o op, name string, body []byte, key string, timeout time.Duration, out *wire.Lease) (found bool, err error) {
	status, r, err := b.call(ctx, o, body, key, timeout)
	if err != nil {
		return false, netError(o.String(), name, err)
	}
	defer putBuffer(r)
	return decodeLease(o.String(), name, status, r.b, out)
}

// call carries o: over sema-mux if the server speaks it, else HTTP.
func (b *Backend) call(ctx context.Context, o op, body []byte, key string, timeout time.Duration) (int, *buffer, error) {
	if b.mux != nil && !b.noMux {
		var deadline time.Time
		if timeout > 0 {
			// A context that ends sooner bounds the call already.
			deadline = time.Now().Add(timeout)
			if dl, ok := ctx.Deadline(); ok && !dl.After(deadline) {
				deadline = time.Time{}
			}
		}
		poll := o == opAcquire && timeout == 0
		r := getBuffer()
		status, out, err, ok := b.mux.do(ctx, byte(o), body, deadline, poll, b.giveBackTimeout(), r.b[:0])
		r.b = out
		if ok {
			if err != nil {
				putBuffer(r)
				return 0, nil, err
			}
			b.reached.Store(true)
			return status, r, nil
		}
		putBuffer(r)
	}
	if sema.ValidateID(key) != nil {
		key = "" // not a header value: the server will reject the id anyway
	}
	return b.roundTrip(ctx, http.MethodPost, b.opURL[o], bytes.Clone(body), key, timeout, o == opAcquire)
}

// roundTrip sends one HTTP request and reads the whole answer. key, if not
// empty, is sent as Idempotency-Key, which lets net/http replay the request
// on a stale keep-alive connection. timeout > 0 limits the call; 0 marks a
// long poll, which Close ends. Errors are transport errors (the caller
// wraps them in sema.ErrUnavailable).
func (b *Backend) roundTrip(ctx context.Context, method string, u *url.URL, body []byte, key string, timeout time.Duration, poll bool) (int, *buffer, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = bound(ctx, timeout)
		defer cancel()
	} else if poll {
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
		return 0, nil, err
	}
	req.URL = u
	if body != nil {
		req.Header["Content-Type"] = jsonContentType
	}
	req.Header["Accept"] = jsonContentType
	if b.auth != nil {
		req.Header["Authorization"] = b.auth
	}
	if key != "" {
		req.Header["Idempotency-Key"] = []string{key}
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	r := getBuffer()
	r.b, err = readAll(resp.Body, r.b[:0])
	resp.Body.Close()
	if err != nil {
		putBuffer(r)
		return 0, nil, err
	}
	b.reached.Store(true)
	return resp.StatusCode, r, nil
}

var jsonContentType = []string{"application/json"}

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

// decodeLease decodes an Envelope into *out (see leaseCall). Heartbeat
// spaces before the JSON are whitespace to the decoder; an error in the
// body wins over the status.
func decodeLease(op, name string, status int, body []byte, out *wire.Lease) (found bool, err error) {
	if status == http.StatusOK {
		if empty, ok := wire.ParseLease(body, out); ok {
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
func (b *Backend) callJSON(ctx context.Context, op, name, method string, u *url.URL, body []byte, out any) error {
	status, r, err := b.roundTrip(ctx, method, u, body, "", b.cfg.RequestTimeout, false)
	if err != nil {
		return netError(op, name, err)
	}
	defer putBuffer(r)
	if status != http.StatusOK {
		var env wire.Envelope
		if json.Unmarshal(r.b, &env) == nil && env.Error != nil {
			return apiError(op, name, env.Error)
		}
		return badAnswer(op, name, status, r.b)
	}
	if err := json.Unmarshal(r.b, out); err != nil {
		return badAnswer(op, name, status, r.b)
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
