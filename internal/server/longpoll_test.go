package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema/internal/wire"
)

func fastHeartbeat(c *Config) { c.Heartbeat = 30 * time.Millisecond }

func TestLongPollHeartbeatThenGrant(t *testing.T) {
	ts := newTS(t, nil, nil, fastHeartbeat)
	held := ts.mustAcquire("", wire.AcquireRequest{Name: "lp"})
	resp := make(chan reply, 1)
	go func() { resp <- ts.acquire("", wire.AcquireRequest{Name: "lp", WaitMillis: 20000}) }()
	eventually(t, "waiter queued", func() bool { return len(ts.describe("", "lp").Waiters) == 1 })
	time.Sleep(100 * time.Millisecond) // a few heartbeats (the test asserts on them, not on time)
	if r := ts.do("POST", wire.PathRelease, "", wire.ReleaseRequest{Name: "lp", ID: held.ID}); r.status != 200 {
		t.Fatal(r.raw)
	}
	r := <-resp
	if r.status != 200 || !strings.HasPrefix(r.raw, " ") || r.env.Lease == nil || r.env.Lease.Token <= held.Token {
		t.Fatalf("long-poll answer %d %q", r.status, r.raw)
	}
	if r.env.Lease.WaitedMillis <= 0 {
		t.Errorf("waited_ms = %v", r.env.Lease.WaitedMillis)
	}
}

func TestLongPollWaitRunsOut(t *testing.T) {
	ts := newTS(t, nil, nil) // default heartbeat 5s: the answer comes first
	ts.mustAcquire("", wire.AcquireRequest{Name: "lp2", Owner: "holder"})
	r := ts.acquire("", wire.AcquireRequest{Name: "lp2", WaitMillis: 150})
	wantErr(t, r, 409, wire.CodeNotAcquired)
	if r.env.Error != nil && (len(r.env.Error.Holders) != 1 || r.env.Error.Holders[0].Owner != "holder") {
		t.Errorf("holders in the error: %s", r.raw)
	}
	// With heartbeats first, the error comes inside a 200.
	ts2 := newTS(t, nil, nil, fastHeartbeat)
	ts2.mustAcquire("", wire.AcquireRequest{Name: "lp2"})
	r = ts2.acquire("", wire.AcquireRequest{Name: "lp2", WaitMillis: 200})
	if r.status != 200 || !strings.HasPrefix(r.raw, " ") || r.env.Error == nil || r.env.Error.Code != wire.CodeNotAcquired {
		t.Errorf("after heartbeats: %d %q", r.status, r.raw)
	}
	if st := ts2.describe("", "lp2"); len(st.Waiters) != 0 {
		t.Errorf("a waiter is left behind: %+v", st)
	}
}

// TestDisconnectLeavesNoGhost: a client that hangs up while waiting is
// dequeued, and the permits released afterwards are not granted to it.
func TestDisconnectLeavesNoGhost(t *testing.T) {
	ts := newTS(t, nil, nil)
	held := ts.mustAcquire("", wire.AcquireRequest{Name: "ghost"})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		body, _ := json.Marshal(wire.AcquireRequest{Name: "ghost", WaitMillis: 60000})
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.url+wire.PathAcquire, bytes.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	eventually(t, "waiter queued", func() bool { return len(ts.describe("", "ghost").Waiters) == 1 })
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the cancelled request succeeded")
	}
	eventually(t, "waiter dequeued", func() bool { return len(ts.describe("", "ghost").Waiters) == 0 })
	ts.do("POST", wire.PathRelease, "", wire.ReleaseRequest{Name: "ghost", ID: held.ID})
	if st := ts.describe("", "ghost"); len(st.Holders) != 0 || len(st.Waiters) != 0 {
		t.Fatalf("ghost state after release: %+v", st)
	}
}

// TestUndeliveredGrantGivenBack races a release (granting the waiter)
// with the waiter hanging up, many times: whichever wins, no permit stays
// held by nobody. The server gives back what it cannot deliver; a grant
// it did write to a connection the client had just closed is given back
// by the client by its lease id, as the sema core does.
func TestUndeliveredGrantGivenBack(t *testing.T) {
	ts := newTS(t, nil, nil)
	clientGaveBack := 0
	defer func() { t.Logf("the client gave back %d of 30 grants", clientGaveBack) }()
	for i := range 30 {
		held := ts.mustAcquire("", wire.AcquireRequest{Name: "race"})
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan *wire.Lease, 1)
		id := fmt.Sprintf("race-%d", i)
		go func() {
			body, _ := json.Marshal(wire.AcquireRequest{Name: "race", ID: id, WaitMillis: 60000})
			req, _ := http.NewRequestWithContext(ctx, "POST", ts.url+wire.PathAcquire, bytes.NewReader(body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				got <- nil
				return
			}
			defer resp.Body.Close()
			var env wire.Envelope
			b, _ := io.ReadAll(resp.Body)
			if json.Unmarshal(b, &env) != nil {
				got <- nil
				return
			}
			got <- env.Lease
		}()
		eventually(t, "waiter queued", func() bool { return len(ts.describe("", "race").Waiters) == 1 })
		go ts.do("POST", wire.PathRelease, "", wire.ReleaseRequest{Name: "race", ID: held.ID})
		if i%3 != 0 {
			time.Sleep(time.Duration(i%5) * 50 * time.Microsecond)
		}
		cancel()
		<-got // delivered or not, the client gives it back
		if r := ts.do("POST", wire.PathRelease, "", wire.ReleaseRequest{Name: "race", ID: id}); r.status == 200 {
			clientGaveBack++
		}
		eventually(t, "no ghost holder", func() bool {
			st := ts.describe("", "race")
			return len(st.Holders) == 0 && len(st.Waiters) == 0
		})
	}
}

func TestShutdownAnswersWaitersClosed(t *testing.T) {
	ts := newTS(t, nil, nil)
	ts.mustAcquire("", wire.AcquireRequest{Name: "bye"})
	resp := make(chan reply, 1)
	go func() { resp <- ts.acquire("", wire.AcquireRequest{Name: "bye", WaitMillis: 60000}) }()
	eventually(t, "waiter queued", func() bool { return len(ts.describe("", "bye").Waiters) == 1 })
	ts.srv.Close()
	wantErr(t, <-resp, 503, wire.CodeClosed)
	wantErr(t, ts.acquire("", wire.AcquireRequest{Name: "new"}), 503, wire.CodeClosed)
	if r := ts.do("GET", wire.PathHealth, "", nil); r.status != 503 {
		t.Errorf("healthz while closing: %d", r.status)
	}
}
