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

	"github.com/sema-dev/sema/internal/wire"
)

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
	_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
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

// TestTakenOverConnection drives one keep-alive connection through the
// server's own HTTP/1.1 loop: pipelined hot requests, every other route
// and framing through the fallback, then a body over the limit.
func TestTakenOverConnection(t *testing.T) {
	ts := newTS(t, testTokens, nil)
	c := dialRaw(t, ts)
	c.send(rawPost(wire.PathAcquire, aliceTok, `{"name":"h1/a"}`)) // net/http, then taken over
	_, body := c.read("POST")
	first := leaseIn(t, body)
	eventually(t, "connection taken over", func() bool {
		ts.srv.connMu.Lock()
		defer ts.srv.connMu.Unlock()
		return len(ts.srv.conns) == 1
	})

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

	// The fallback: other routes, HEAD, a chunked hot request, a query.
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

	// A body over the limit: 413, and the connection closes.
	c.send(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: sema\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n",
		wire.PathAcquire, aliceTok, wire.MaxBodyBytes+1))
	if resp, body = c.read("POST"); resp.StatusCode != 413 || !resp.Close {
		t.Fatalf("huge body: %d %q close=%v", resp.StatusCode, body, resp.Close)
	}
	if _, err := c.br.ReadByte(); err == nil {
		t.Fatal("the connection stayed open after a body over the limit")
	}
}

// TestTakenOverLongPoll: on a taken-over connection a long poll gets its
// heartbeats and grant, and a client that hangs up while waiting is
// dequeued.
func TestTakenOverLongPoll(t *testing.T) {
	ts := newTS(t, nil, nil, fastHeartbeat)
	c := dialRaw(t, ts)
	held := queueWaiter(t, ts, c, "h1/lp")
	time.Sleep(100 * time.Millisecond) // heartbeats
	ts.do("POST", wire.PathRelease, "", wire.ReleaseRequest{Name: "h1/lp", ID: held.ID})
	resp, body := c.read("POST")
	if resp.StatusCode != 200 || !strings.HasPrefix(body, " ") || leaseIn(t, body).ID != "w1" {
		t.Fatalf("long poll: %d %q", resp.StatusCode, body)
	}

	// A wait that runs out after heartbeats: the error inside the 200.
	c.send(rawPost(wire.PathAcquire, "", `{"name":"h1/lp","id":"w3","wait_ms":150}`))
	resp, body = c.read("POST")
	if resp.StatusCode != 200 || !strings.HasPrefix(body, " ") || !strings.Contains(body, wire.CodeNotAcquired) {
		t.Fatalf("wait ran out: %d %q", resp.StatusCode, body)
	}

	// Hang up while waiting: dequeued, and nothing is granted to nobody.
	c.send(rawPost(wire.PathAcquire, "", `{"name":"h1/lp","id":"w2","wait_ms":20000}`))
	eventually(t, "second waiter queued", func() bool { return len(ts.describe("", "h1/lp").Waiters) == 1 })
	c.nc.Close()
	eventually(t, "waiter dequeued", func() bool { return len(ts.describe("", "h1/lp").Waiters) == 0 })
	ts.do("POST", wire.PathRelease, "", wire.ReleaseRequest{Name: "h1/lp", ID: "w1"})
	if st := ts.describe("", "h1/lp"); len(st.Holders) != 0 {
		t.Fatalf("ghost holder: %+v", st)
	}
}

// TestShutdownClosesTakenOver: Shutdown closes idle taken-over
// connections and answers their waiters "closed".
func TestShutdownClosesTakenOver(t *testing.T) {
	ts := newTS(t, nil, nil)
	idle, waiting := dialRaw(t, ts), dialRaw(t, ts)
	for _, c := range []*rawConn{idle, waiting} {
		c.send(rawPost(wire.PathAcquire, "", `{"name":"h1/bye-`+fmt.Sprint(c == idle)+`"}`))
		c.read("POST")
	}
	waiting.send(rawPost(wire.PathAcquire, "", `{"name":"h1/bye-false","wait_ms":60000}`))
	eventually(t, "waiter queued", func() bool { return len(ts.describe("", "h1/bye-false").Waiters) == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if resp, body := waiting.read("POST"); resp.StatusCode != 503 || !strings.Contains(body, wire.CodeClosed) {
		t.Fatalf("waiter at shutdown: %d %q", resp.StatusCode, body)
	}
	_ = idle.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
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
	eventually(t, "waiter queued", func() bool { return len(ts.describe("", name).Waiters) == 1 })
	return held
}
