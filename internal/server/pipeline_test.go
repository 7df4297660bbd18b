package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema/internal/wire"
)

// Requests pipelined on one keep-alive HTTP/1.1 connection, and requests
// that arrive in pieces.

// TestKeepAliveRoundTrips: requests sent right after the previous answer,
// pipelined pairs, requests written a few bytes at a time and a burst
// larger than the connection's reader are all answered (a lost request
// would hang the client, which fails on its read deadline).
func TestKeepAliveRoundTrips(t *testing.T) {
	ts := newTS(t, nil, nil)
	c := dialRaw(t, ts)
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

	// A head larger than the reader, then a plain request again,
	// pipelined behind it.
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

// TestPipelinedRequests: pipelined requests are answered in order, on a
// fresh connection and again on a used one.
func TestPipelinedRequests(t *testing.T) {
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

// TestPipelinedAnswersInOrder: answers of pipelined requests (releases,
// errors) go out in order, and are written before the connection waits:
// here for a long poll pipelined behind them, which waits until another
// connection frees its name. An answer held past that point would hang
// the reads below (until the poll's first heartbeat, which is set beyond
// their deadline).
func TestPipelinedAnswersInOrder(t *testing.T) {
	ts := newTS(t, nil, nil, func(c *Config) { c.Heartbeat = time.Minute })
	c := dialRaw(t, ts)
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
