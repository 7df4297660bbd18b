package remote

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sema-dev/sema/internal/wire"
)

// The sema-mux transport (protocol: internal/wire/mux.go).
//
// The backend carries its acquires, renewals and releases on one
// connection upgraded to sema-mux (over TLS for https:// URLs): a caller
// appends its frame to the connection's buffer, and whichever caller finds
// it not writing writes everything buffered in one write; one goroutine
// reads the answers, in whatever order they come, and hands each to its
// caller by tag. A process whose goroutines wait for or hand over locks
// thus costs one connection and, under load, one write and one read per
// batch of calls on either side, where HTTP/1.1 needs a connection per
// call in flight and a write and a read per call.
//
// A call with a deadline that passes unanswered is forgotten (its answer,
// if it comes, is dropped: tags are not reused while a connection lives);
// a long poll whose context ends is cancelled with a MuxCancel frame and
// its answer, a grant or the cancellation, is still awaited (for the
// give-back timeout), so a grant made in that instant is not lost. Frames
// are served in order, so a give-back sent after a cancelled call reaches
// the server after it. Calls that got no answer before the server closed
// or reset the connection are sent again on a new one, at most twice, as
// on a stale keep-alive connection (every call is idempotent). A server
// that refuses the upgrade (not a sema server of this version, or a proxy
// in between) is spoken to in HTTP for a minute before it is asked
// again. Close half-closes the connection: the server answers the waiting
// polls as cancelled, then closes it.

type muxTransport struct {
	dialer *net.Dialer
	addr   string      // host:port to dial
	tls    *tls.Config // for https: the handshake's (HTTP/1.1 by ALPN)
	up     *http.Request

	mu      sync.Mutex
	conn    *muxConn      // nil before the first call, after a failure
	dialing chan struct{} // closed when the dial in progress ends
	off     time.Time     // refused: HTTP until then
	closed  bool
	dialed  atomic.Int64 // connections upgraded (tests)

	onNotice func(wire.Notice) // the server's notices (set before the first call)
}

// newMuxTransport returns the sema-mux transport to the server at base.
func newMuxTransport(base *url.URL, d *net.Dialer, tc *tls.Config, token string) *muxTransport {
	t := &muxTransport{dialer: d, addr: base.Host}
	port := "80"
	if base.Scheme == "https" {
		port = "443"
		t.tls = &tls.Config{}
		if tc != nil {
			t.tls = tc.Clone()
		}
		t.tls.NextProtos = []string{"http/1.1"} // an upgrade needs HTTP/1.1
		if t.tls.ServerName == "" {
			t.tls.ServerName = base.Hostname()
		}
	}
	if base.Port() == "" {
		t.addr = net.JoinHostPort(base.Hostname(), port)
	}
	u := *base
	u.Path += wire.PathMux
	if u.RawPath != "" {
		u.RawPath += wire.PathMux
	}
	t.up = &http.Request{Method: http.MethodGet, URL: &u, Host: base.Host, ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Connection": {"Upgrade"}, "Upgrade": {wire.MuxProtocol}}}
	if token != "" {
		t.up.Header.Set("Authorization", "Bearer "+token)
	}
	return t
}

var (
	// errMuxOff sends a call to HTTP: the server refused the upgrade, the
	// connection is full, or the transport is closed.
	errMuxOff = errors.New("sema-mux not in use")
	// errMuxCancelled is the answer to a poll this client cancelled.
	errMuxCancelled = errors.New("long poll cancelled")
)

// errRefused is a server's answer to the upgrade other than 101.
type errRefused struct{ status int }

func (e *errRefused) Error() string {
	return fmt.Sprintf("sema-mux upgrade refused (HTTP %d)", e.status)
}

// off is how long the server is then spoken to in HTTP only: a minute if
// it does not know the upgrade (an older server, a proxy), a second if it
// refused this caller or is unavailable (the HTTP call reports why).
func (e *errRefused) off() time.Duration {
	switch e.status {
	case 400, 404, 405, 426, 501:
		return time.Minute
	}
	return time.Second
}

// do sends one call and waits for its answer's body, read into out. ok
// false: the call was not made (errMuxOff); use HTTP.
func (t *muxTransport) do(ctx context.Context, op byte, body []byte, deadline time.Time, poll bool, drain time.Duration, out []byte) (status int, res []byte, err error, ok bool) {
	for attempt := 0; ; attempt++ {
		c, err := t.get(ctx)
		if err == errMuxOff {
			return 0, out, nil, false
		}
		if err != nil {
			return 0, out, err, true
		}
		call := muxCalls.Get().(*muxCall)
		call.status, call.out, call.err = 0, out, nil
		tag, err := c.send(call, op, body)
		if err == errMuxOff {
			muxCalls.Put(call)
			return 0, out, nil, false
		}
		if err == nil {
			err = c.wait(ctx, call, tag, deadline, poll, drain)
		}
		status, res = call.status, call.out
		if err == nil {
			err = call.err
		}
		call.out = nil
		muxCalls.Put(call)
		if err == nil && status == wire.MuxStatusCancelled {
			err = errMuxCancelled
		}
		if errors.Is(err, errRetry) && attempt < 2 && ctx.Err() == nil {
			out = res[:0]
			continue
		}
		return status, res, err, true
	}
}

// get returns the live connection, dialing one if there is none.
func (t *muxTransport) get(ctx context.Context) (*muxConn, error) {
	t.mu.Lock()
	for {
		switch {
		case t.closed:
			t.mu.Unlock()
			return nil, errMuxOff
		case t.conn != nil:
			c := t.conn
			t.mu.Unlock()
			return c, nil
		case time.Now().Before(t.off):
			t.mu.Unlock()
			return nil, errMuxOff
		case t.dialing != nil:
			ch := t.dialing
			t.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
			t.mu.Lock()
			continue
		}
		break
	}
	ch := make(chan struct{})
	t.dialing = ch
	t.mu.Unlock()
	c, err := t.dial(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	close(ch)
	t.dialing = nil
	var refused *errRefused
	switch {
	case errors.As(err, &refused):
		t.off = time.Now().Add(refused.off())
		err = errMuxOff
	case err != nil:
	case t.closed:
		c.nc.Close()
		return nil, errMuxOff
	default:
		t.conn = c
		t.dialed.Add(1)
		go c.readLoop()
	}
	return c, err
}

// dial opens a connection and upgrades it. *errRefused: the server
// answered the upgrade with anything but 101.
func (t *muxTransport) dial(ctx context.Context) (*muxConn, error) {
	var nc net.Conn
	var err error
	if t.tls != nil {
		nc, err = (&tls.Dialer{NetDialer: t.dialer, Config: t.tls}).DialContext(ctx, "tcp", t.addr)
	} else {
		nc, err = t.dialer.DialContext(ctx, "tcp", t.addr)
	}
	if err != nil {
		return nil, err
	}
	c := &muxConn{t: t, nc: nc, br: bufio.NewReaderSize(nc, 16<<10), calls: make(map[uint32]*muxCall)}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	} else {
		_ = nc.SetDeadline(time.Now().Add(t.dialer.Timeout))
	}
	if err := t.up.Write(nc); err != nil {
		nc.Close()
		return nil, err
	}
	resp, err := http.ReadResponse(c.br, t.up)
	if err != nil {
		nc.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		resp.Body.Close()
		nc.Close()
		return nil, &errRefused{resp.StatusCode}
	}
	if !strings.EqualFold(resp.Header.Get("Upgrade"), wire.MuxProtocol) {
		nc.Close()
		return nil, fmt.Errorf("%w: 101 without Upgrade: %s", errMalformed, wire.MuxProtocol)
	}
	_ = nc.SetDeadline(time.Time{})
	return c, nil
}

// errMalformed reports an answer that does not follow the protocol.
var errMalformed = errors.New("malformed answer")

// errRetry marks a call that got no answer before the server closed or
// reset the connection: it may be sent again (every call is idempotent).
var errRetry = errors.New("connection closed before the answer")

// close half-closes the connection: the server cancels its polls,
// answers every call and closes it; a deadline bounds that.
func (t *muxTransport) close(drain time.Duration) {
	t.mu.Lock()
	t.closed = true
	c := t.conn
	t.mu.Unlock()
	if c == nil {
		return
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(drain))
	if cw, ok := c.nc.(interface{ CloseWrite() error }); !ok || cw.CloseWrite() != nil {
		c.nc.Close()
	}
}
