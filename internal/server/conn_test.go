package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema/internal/testenv"
	"github.com/sema-dev/sema/internal/wire"
)

// Keep-alive HTTP/1.1 connections, as curl and the clients of other
// languages use them.

// rawConn is a client connection that writes raw requests and reads
// answers with net/http's parser.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, ts *tserver) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func rawPost(path, token, body string) string {
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: sema\r\n%sContent-Length: %d\r\n\r\n%s", path, auth, len(body), body)
}

func (c *rawConn) send(reqs ...string) {
	c.t.Helper()
	if _, err := io.WriteString(c.nc, strings.Join(reqs, "")); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawConn) read(method string) (*http.Response, string) {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(testenv.HangGuard))
	resp, err := http.ReadResponse(c.br, &http.Request{Method: method})
	if err != nil {
		c.t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, string(b)
}

func leaseIn(t *testing.T, body string) *wire.Lease {
	t.Helper()
	var env wire.Envelope
	if json.Unmarshal([]byte(body), &env) != nil || env.Lease == nil {
		t.Fatalf("no lease in %q", body)
	}
	return env.Lease
}

// TestKeepAliveConnection drives one keep-alive connection: pipelined
// calls, every other route and framing, then a body over the limit.
func TestKeepAliveConnection(t *testing.T) {
	ts := newTS(t, testTokens, nil)
	c := dialRaw(t, ts)
	c.send(rawPost(wire.PathAcquire, aliceTok, `{"name":"h1/a"}`))
	_, body := c.read("POST")
	first := leaseIn(t, body)

	// Pipelined: acquire, release, release again (not held), a wrong token.
	c.send(rawPost(wire.PathAcquire, aliceTok, `{"name":"h1/b","id":"b1"}`),
		rawPost(wire.PathRelease, aliceTok, `{"name":"h1/a","id":"`+first.ID+`"}`),
		rawPost(wire.PathRelease, aliceTok, `{"name":"h1/a","id":"`+first.ID+`"}`),
		rawPost(wire.PathRelease, unknownTk, `{"name":"h1/b","id":"b1"}`))
	resp, body := c.read("POST")
	if resp.StatusCode != 200 || leaseIn(t, body).ID != "b1" || resp.ContentLength != int64(len(body)) {
		t.Fatalf("acquire: %d %q", resp.StatusCode, body)
	}
	if resp, body = c.read("POST"); resp.StatusCode != 200 || body != "{}\n" {
		t.Fatalf("release: %d %q", resp.StatusCode, body)
	}
	if resp, body = c.read("POST"); resp.StatusCode != 404 || !strings.Contains(body, wire.CodeNotHeld) {
		t.Fatalf("second release: %d %q", resp.StatusCode, body)
	}
	if resp, body = c.read("POST"); resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("unknown token: %d %q %v", resp.StatusCode, body, resp.Header)
	}

	// A body that arrives after its head (the token is checked before the
	// body is read into the buffer that held the head).
	split := rawPost(wire.PathAcquire, aliceTok, `{"name":"h1/split","owner":"`+strings.Repeat("o", 100)+`"}`)
	cut := strings.Index(split, "\r\n\r\n") + 4
	c.send(split[:cut])
	time.Sleep(50 * time.Millisecond)
	c.send(split[cut:])
	if resp, body = c.read("POST"); resp.StatusCode != 200 {
		t.Fatalf("split request: %d %q", resp.StatusCode, body)
	}

	// Other routes, HEAD, a chunked request, a query.
	chunk := `{"name":"h1/b","id":"b1"}`
	c.send("GET /healthz HTTP/1.1\r\nHost: sema\r\n\r\n",
		"HEAD /healthz HTTP/1.1\r\nHost: sema\r\n\r\n",
		"GET /v1/locks/h1%2Fb HTTP/1.1\r\nHost: sema\r\nAuthorization: Bearer "+aliceTok+"\r\n\r\n",
		"POST /v1/release?x=1 HTTP/1.1\r\nHost: sema\r\nAuthorization: Bearer "+aliceTok+
			fmt.Sprintf("\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(chunk), chunk),
		"GET /v1/acquire HTTP/1.1\r\nHost: sema\r\n\r\n")
	if resp, body = c.read("GET"); resp.StatusCode != 200 || body != "ok\n" {
		t.Fatalf("healthz: %d %q", resp.StatusCode, body)
	}
	if resp, body = c.read("HEAD"); resp.StatusCode != 200 || body != "" || resp.ContentLength != 3 {
		t.Fatalf("HEAD healthz: %d %q %d", resp.StatusCode, body, resp.ContentLength)
	}
	if resp, body = c.read("GET"); resp.StatusCode != 200 || !strings.Contains(body, `"used":1`) {
		t.Fatalf("describe: %d %q", resp.StatusCode, body)
	}
	if resp, body = c.read("POST"); resp.StatusCode != 200 || body != "{}\n" {
		t.Fatalf("chunked release: %d %q", resp.StatusCode, body)
	}
	if resp, body = c.read("GET"); resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Fatalf("GET acquire: %d %q", resp.StatusCode, body)
	}

	// A body over the limit, sent: 413, and the connection closes (once
	// net/http has read past the body, which it does for bodies up to
	// 256 KiB; see TestHugeBodyClosesAtOnce for larger ones).
	c.send(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: sema\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s",
		wire.PathAcquire, aliceTok, wire.MaxBodyBytes+1, strings.Repeat(" ", wire.MaxBodyBytes+1)))
	if resp, body = c.read("POST"); resp.StatusCode != 413 || !resp.Close {
		t.Fatalf("huge body: %d %q close=%v", resp.StatusCode, body, resp.Close)
	}
	if _, err := c.br.ReadByte(); err != io.EOF {
		t.Fatalf("after a body over the limit: %v; want the connection closed", err)
	}
}

// TestHugeBodyClosesAtOnce: a request that announces a body far over the
// limit is answered 413 without reading it, and its connection closes at
// once, whether or not the client sends the body.
func TestHugeBodyClosesAtOnce(t *testing.T) {
	ts := newTS(t, nil, nil)
	c := dialRaw(t, ts)
	c.send(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: sema\r\nContent-Length: %d\r\n\r\n", wire.PathAcquire, 1<<30))
	if resp, body := c.read("POST"); resp.StatusCode != 413 || !resp.Close {
		t.Fatalf("huge body: %d %q close=%v", resp.StatusCode, body, resp.Close)
	}
	if _, err := c.br.ReadByte(); err != io.EOF {
		t.Fatalf("after a huge body: %v; want the connection closed", err)
	}
}

// TestLongPollOnKeepAlive: on a keep-alive connection a long poll gets
// its heartbeats and grant, and a client that hangs up while waiting is
// dequeued.
func TestLongPollOnKeepAlive(t *testing.T) {
	ts := newTS(t, nil, nil, fastHeartbeat)
	c := dialRaw(t, ts)
	held := queueWaiter(t, ts, c, "h1/lp")
	// The head goes out with the first heartbeat: read it and a space,
	// then release.
	_ = c.nc.SetReadDeadline(time.Time{})
	resp, err := http.ReadResponse(c.br, &http.Request{Method: "POST"})
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 1)
	if _, err := io.ReadFull(resp.Body, first); resp.StatusCode != 200 || err != nil || first[0] != ' ' {
		t.Fatalf("long poll: %d, first byte %q, %v; want 200 and a space", resp.StatusCode, first, err)
	}
	ts.do("POST", wire.PathRelease, "", wire.ReleaseRequest{Name: "h1/lp", ID: held.ID})
	rest, err := io.ReadAll(resp.Body)
	if err != nil || leaseIn(t, string(rest)).ID != "w1" {
		t.Fatalf("long poll after the heartbeat: %q, %v", rest, err)
	}

	// A wait that runs out after heartbeats: the error inside the 200.
	body := waitRunsOutAfterHeartbeat(t, func(waitMs int64) (int, string) {
		c.send(rawPost(wire.PathAcquire, "", fmt.Sprintf(`{"name":"h1/lp","id":"w3","wait_ms":%d}`, waitMs)))
		resp, body := c.read("POST")
		return resp.StatusCode, body
	})
	if !strings.Contains(body, wire.CodeNotAcquired) {
		t.Fatalf("wait ran out: %q", body)
	}

	// Hang up while waiting: dequeued, and nothing is granted to nobody.
	c.send(rawPost(wire.PathAcquire, "", `{"name":"h1/lp","id":"w2","wait_ms":20000}`))
	testenv.WaitFor(t, "second waiter queued", func() bool { return len(ts.describe("", "h1/lp").Waiters) == 1 })
	c.nc.Close()
	testenv.WaitFor(t, "waiter dequeued", func() bool { return len(ts.describe("", "h1/lp").Waiters) == 0 })
	ts.do("POST", wire.PathRelease, "", wire.ReleaseRequest{Name: "h1/lp", ID: "w1"})
	if st := ts.describe("", "h1/lp"); len(st.Holders) != 0 {
		t.Fatalf("ghost holder: %+v", st)
	}
}

// TestShutdownClosesConnections: a shutdown (as sema serve does it)
// closes idle keep-alive connections and answers their waiters "closed".
func TestShutdownClosesConnections(t *testing.T) {
	ts := newTS(t, nil, nil)
	idle, waiting := dialRaw(t, ts), dialRaw(t, ts)
	for _, c := range []*rawConn{idle, waiting} {
		c.send(rawPost(wire.PathAcquire, "", `{"name":"h1/bye-`+fmt.Sprint(c == idle)+`"}`))
		c.read("POST")
	}
	waiting.send(rawPost(wire.PathAcquire, "", `{"name":"h1/bye-false","wait_ms":60000}`))
	testenv.WaitFor(t, "waiter queued", func() bool { return len(ts.describe("", "h1/bye-false").Waiters) == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go ts.hs.Config.Shutdown(ctx) // answers the waiter via RegisterOnShutdown
	if err := ts.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if resp, body := waiting.read("POST"); resp.StatusCode != 503 || !strings.Contains(body, wire.CodeClosed) {
		t.Fatalf("waiter at shutdown: %d %q", resp.StatusCode, body)
	}
	_ = idle.nc.SetReadDeadline(time.Now().Add(testenv.HangGuard))
	if _, err := idle.br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection after shutdown: %v", err)
	}
}

// queueWaiter takes name on c, then queues a long poll for it (id "w1") on
// c behind that lease, and returns the lease.
func queueWaiter(t *testing.T, ts *tserver, c *rawConn, name string) *wire.Lease {
	t.Helper()
	c.send(rawPost(wire.PathAcquire, "", `{"name":"`+name+`"}`))
	_, body := c.read("POST")
	held := leaseIn(t, body)
	c.send(rawPost(wire.PathAcquire, "", `{"name":"`+name+`","id":"w1","wait_ms":20000}`))
	testenv.WaitFor(t, "waiter queued", func() bool { return len(ts.describe("", name).Waiters) == 1 })
	return held
}

// timedTS is a server with the given http.Server timeouts.
func timedTS(t *testing.T, idle, head, read time.Duration) *tserver {
	t.Helper()
	return startTS(t, nil, nil, func(hs *http.Server) {
		hs.IdleTimeout, hs.ReadHeaderTimeout, hs.ReadTimeout = idle, head, read
	})
}

// TestConnectionTimeouts: a connection that stays idle, sends half a
// head, or a head without its body, is closed past its timeout (after a
// 400 for the last two).
func TestConnectionTimeouts(t *testing.T) {
	req := rawPost(wire.PathAcquire, "", `{"name":"h1raw/t"}`)
	cut := strings.Index(req, "\r\n\r\n") + 4
	for _, tc := range []struct {
		name string
		send string
	}{
		{"idle", ""},
		{"head", req[:cut-10]},
		{"body", req[:cut+3]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := timedTS(t, 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond)
			c := dialRaw(t, ts)
			c.send(rawPost(wire.PathRelease, "", `{"name":"h1raw/none","id":"x"}`))
			c.read("POST")
			if tc.send != "" {
				c.send(tc.send)
			}
			// net/http may answer 400 first; then the connection closes.
			_ = c.nc.SetReadDeadline(time.Now().Add(testenv.HangGuard))
			if rest, err := io.ReadAll(c.br); err != nil {
				t.Fatalf("the connection stayed open: %v (read %q)", err, rest)
			}
		})
	}
}

// TestLongPollOutlivesIdleTimeout: a long poll on a keep-alive connection
// lasts longer than the connection's idle timeout (no heartbeat meanwhile):
// the client stays queued, gets its grant and keeps the connection.
func TestLongPollOutlivesIdleTimeout(t *testing.T) {
	ts := startTS(t, nil, nil, func(hs *http.Server) {
		hs.IdleTimeout, hs.ReadTimeout = 100*time.Millisecond, 100*time.Millisecond
	}, func(c *Config) { c.Heartbeat = time.Minute })

	c := dialRaw(t, ts)
	held := queueWaiter(t, ts, c, "h1/idle")
	// A connection opened now and left idle is closed once the timeout
	// has passed: by then the poll has outlived it.
	idle := dialRaw(t, ts)
	_ = idle.nc.SetReadDeadline(time.Now().Add(testenv.HangGuard))
	if _, err := idle.br.ReadByte(); err != io.EOF {
		t.Fatalf("an idle connection: %v; want it closed", err)
	}
	if st := ts.describe("", "h1/idle"); len(st.Waiters) != 1 {
		t.Fatalf("the waiter left the queue during its long poll: %+v", st)
	}
	ts.do("POST", wire.PathRelease, "", wire.ReleaseRequest{Name: "h1/idle", ID: held.ID})
	resp, body := c.read("POST")
	if resp.StatusCode != 200 || leaseIn(t, body).ID != "w1" {
		t.Fatalf("long poll: %d %q", resp.StatusCode, body)
	}
	c.send(rawPost(wire.PathRelease, "", `{"name":"h1/idle","id":"w1"}`))
	if resp, body := c.read("POST"); resp.StatusCode != 200 || !strings.HasPrefix(body, "{}") {
		t.Fatalf("release after the poll: %d %q", resp.StatusCode, body)
	}
}

// TestH2C: the API over HTTP/2 without TLS (prior knowledge), as sema
// serve allows it, long poll included.
func TestH2C(t *testing.T) {
	ts := startTS(t, nil, nil, func(hs *http.Server) {
		hs.Protocols = new(http.Protocols)
		hs.Protocols.SetHTTP1(true)
		hs.Protocols.SetUnencryptedHTTP2(true)
	})
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	c := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	post := func(path, body string) (*http.Response, string) {
		t.Helper()
		resp, err := c.Post(ts.url+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := post(wire.PathAcquire, `{"name":"h2c","id":"a"}`)
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 || leaseIn(t, body).ID != "a" {
		t.Fatalf("acquire over h2c: %s %d %q", resp.Proto, resp.StatusCode, body)
	}
	waiter := make(chan string, 1)
	go func() { _, b := post(wire.PathAcquire, `{"name":"h2c","id":"b","wait_ms":10000}`); waiter <- b }()
	testenv.WaitFor(t, "waiter queued", func() bool {
		return len(ts.describe("", "h2c").Waiters) == 1
	})
	if resp, body := post(wire.PathRelease, `{"name":"h2c","id":"a"}`); resp.StatusCode != 200 {
		t.Fatalf("release: %d %q", resp.StatusCode, body)
	}
	if l := leaseIn(t, <-waiter); l.ID != "b" {
		t.Fatalf("long poll over h2c: %+v", l)
	}
}
