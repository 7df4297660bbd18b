package server

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema/internal/store"
	"github.com/sema-dev/sema/internal/wire"
)

// takenOver dials ts and has its connection taken over (one request
// served by net/http first).
func takenOver(t *testing.T, ts *tserver) *rawConn {
	t.Helper()
	c := dialRaw(t, ts)
	c.send(rawPost(wire.PathRelease, "", `{"name":"h1raw/none","id":"x"}`))
	c.read("POST")
	eventually(t, "connection taken over", func() bool {
		ts.srv.connMu.Lock()
		defer ts.srv.connMu.Unlock()
		return len(ts.srv.conns) == 1
	})
	return c
}

// TestRawLoopRoundTrips: requests sent right after the previous answer,
// pipelined pairs, requests written a few bytes at a time and a burst
// larger than the connection's reader are all answered (a request the
// raw loop lost would hang the client, which fails on its read deadline).
func TestRawLoopRoundTrips(t *testing.T) {
	ts := newTS(t, nil, nil)
	c := takenOver(t, ts)
	for i := range 300 {
		name := fmt.Sprintf("h1raw/rt%d", i%3)
		acq := rawPost(wire.PathAcquire, "", `{"name":"`+name+`","id":"a`+fmt.Sprint(i)+`"}`)
		rel := rawPost(wire.PathRelease, "", `{"name":"`+name+`","id":"a`+fmt.Sprint(i)+`"}`)
		switch i % 4 {
		case 0, 1: // one at a time
			c.send(acq)
			if resp, body := c.read("POST"); resp.StatusCode != 200 {
				t.Fatalf("%d: acquire: %d %q", i, resp.StatusCode, body)
			}
			c.send(rel)
		case 2: // pipelined
			c.send(acq, rel)
			if resp, body := c.read("POST"); resp.StatusCode != 200 {
				t.Fatalf("%d: acquire: %d %q", i, resp.StatusCode, body)
			}
		case 3: // in pieces: inside the head, at its end, inside the body
			for _, p := range []string{acq[:7], acq[7:40], acq[40 : len(acq)-5], acq[len(acq)-5:]} {
				c.send(p)
				time.Sleep(time.Millisecond)
			}
			if resp, body := c.read("POST"); resp.StatusCode != 200 {
				t.Fatalf("%d: acquire: %d %q", i, resp.StatusCode, body)
			}
			c.send(rel)
		}
		if resp, body := c.read("POST"); resp.StatusCode != 200 || body != "{}\n" {
			t.Fatalf("%d: release: %d %q", i, resp.StatusCode, body)
		}
	}

	// A burst of 100 pipelined requests (some 12 KB, three readers full).
	sendPairs(t, c, pipelinedPairs("h1raw/burst", "b", 50))

	// A head larger than the reader (served out of the raw loop), then a
	// plain request again, pipelined behind it.
	big := rawPost(wire.PathAcquire, "", `{"name":"h1raw/big","id":"g"}`)
	big = strings.Replace(big, "Host: sema\r\n", "Host: sema\r\nX-Pad: "+strings.Repeat("p", 6000)+"\r\n", 1)
	c.send(big, rawPost(wire.PathRelease, "", `{"name":"h1raw/big","id":"g"}`))
	if resp, body := c.read("POST"); resp.StatusCode != 200 || leaseIn(t, body).ID != "g" {
		t.Fatalf("large head: %d %q", resp.StatusCode, body)
	}
	if resp, body := c.read("POST"); resp.StatusCode != 200 || body != "{}\n" {
		t.Fatalf("after the large head: %d %q", resp.StatusCode, body)
	}
}

// TestRawLoopPipelinedAtTakeOver: requests pipelined behind the one that
// net/http serves are read from what net/http had buffered, then the
// socket.
func TestRawLoopPipelinedAtTakeOver(t *testing.T) {
	ts := newTS(t, nil, nil)
	c := dialRaw(t, ts)
	reqs := pipelinedPairs("h1raw/p", "p", 20)
	sendPairs(t, c, reqs)
	c.send(reqs[0], reqs[1])
	for i := range 2 {
		if resp, body := c.read("POST"); resp.StatusCode != 200 {
			t.Fatalf("again %d: %d %q", i, resp.StatusCode, body)
		}
	}
}

// timedTS is a server with the given http.Server timeouts.
func timedTS(t *testing.T, idle, head, read time.Duration) *tserver {
	t.Helper()
	st, err := store.Open(store.Config{Dir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Backend: st, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv)
	hs.Config.IdleTimeout, hs.Config.ReadHeaderTimeout, hs.Config.ReadTimeout = idle, head, read
	hs.Start()
	t.Cleanup(func() { srv.Close(); hs.Close(); st.Close() })
	return &tserver{t: t, url: hs.URL, srv: srv, st: st, hs: hs}
}

// TestRawLoopTimeouts: the raw loop closes a connection that stays idle,
// sends half a head, or a head without its body, past its timeout.
func TestRawLoopTimeouts(t *testing.T) {
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
			c := takenOver(t, ts)
			if tc.send != "" {
				c.send(tc.send)
			}
			_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.br.ReadByte(); err == nil || strings.Contains(err.Error(), "timeout") {
				t.Fatalf("the connection stayed open: %v", err)
			}
		})
	}
}

// pipelinedPairs is an acquire and a release of each of n names.
func pipelinedPairs(prefix, id string, n int) []string {
	var reqs []string
	for i := range n {
		name := fmt.Sprintf("%s%d", prefix, i)
		reqs = append(reqs, rawPost(wire.PathAcquire, "", `{"name":"`+name+`","id":"`+id+`"}`),
			rawPost(wire.PathRelease, "", `{"name":"`+name+`","id":"`+id+`"}`))
	}
	return reqs
}

// sendPairs sends reqs pipelined and expects each answered 200.
func sendPairs(t *testing.T, c *rawConn, reqs []string) {
	t.Helper()
	c.send(reqs...)
	for i := range reqs {
		if resp, body := c.read("POST"); resp.StatusCode != 200 {
			t.Fatalf("pipelined %d: %d %q", i, resp.StatusCode, body)
		}
	}
}

// TestRawLoopPipelinedAnswersInOrder: answers held while more pipelined
// requests are buffered (releases, errors) go out in order, and are
// written before the connection waits: here for a long poll pipelined
// behind them, which waits until another connection frees its name. An
// answer held past that point would hang the reads below (until the poll's
// first heartbeat, which is set beyond their deadline).
func TestRawLoopPipelinedAnswersInOrder(t *testing.T) {
	ts := newTS(t, nil, nil, func(c *Config) { c.Heartbeat = time.Minute })
	c := takenOver(t, ts)
	var reqs []string
	for i := range 20 {
		name := fmt.Sprintf("h1raw/order%d", i)
		ts.mustAcquire("", wire.AcquireRequest{Name: name, ID: fmt.Sprintf("o%d", i)})
		id := fmt.Sprintf("o%d", i)
		if i%3 == 2 {
			id = "nobody" // answered 404 not_held, in its place
		}
		reqs = append(reqs, rawPost(wire.PathRelease, "", `{"name":"`+name+`","id":"`+id+`"}`))
	}
	held := ts.mustAcquire("", wire.AcquireRequest{Name: "h1raw/order-wait", ID: "holder"})
	reqs = append(reqs, rawPost(wire.PathAcquire, "", `{"name":"h1raw/order-wait","id":"waiter","wait_ms":10000}`))
	c.send(reqs...)
	for i := range 20 {
		resp, body := c.read("POST")
		if want := 200; i%3 == 2 {
			if resp.StatusCode != 404 || !strings.Contains(body, wire.CodeNotHeld) {
				t.Fatalf("answer %d: %d %q; want 404 %s", i, resp.StatusCode, body, wire.CodeNotHeld)
			}
		} else if resp.StatusCode != want || body != "{}\n" {
			t.Fatalf("answer %d: %d %q; want %d {}", i, resp.StatusCode, body, want)
		}
	}
	if r := ts.do("POST", wire.PathRelease, "", wire.ReleaseRequest{Name: held.Name, ID: held.ID}); r.status != 200 {
		t.Fatalf("release of the holder: %d", r.status)
	}
	if resp, body := c.read("POST"); resp.StatusCode != 200 || !strings.Contains(body, `"waiter"`) {
		t.Fatalf("long poll: %d %q", resp.StatusCode, body)
	}
}
