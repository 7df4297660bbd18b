package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/mem"
	"github.com/sema-dev/sema/internal/store"
	"github.com/sema-dev/sema/internal/testenv"
	"github.com/sema-dev/sema/internal/wire"
)

func fastHeartbeat(c *Config) { c.Heartbeat = 30 * time.Millisecond }

// TestLongPollHeartbeatThenGrant: a long poll that outlasts a heartbeat
// gets its 200 and a space, then, once the holder releases, its grant.
// The release waits for the first heartbeat to arrive.
func TestLongPollHeartbeatThenGrant(t *testing.T) {
	ts := newTS(t, nil, nil, fastHeartbeat)
	held := ts.mustAcquire("", wire.AcquireRequest{Name: "lp"})
	body, _ := json.Marshal(wire.AcquireRequest{Name: "lp", WaitMillis: 60000})
	resp, err := http.Post(ts.url+wire.PathAcquire, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Do returns with the head, which goes out with the first heartbeat.
	first := make([]byte, 1)
	if _, err := io.ReadFull(resp.Body, first); resp.StatusCode != 200 || err != nil || first[0] != ' ' {
		t.Fatalf("long poll: %d, first byte %q, %v; want 200 and a space", resp.StatusCode, first, err)
	}
	if r := ts.do("POST", wire.PathRelease, "", wire.ReleaseRequest{Name: "lp", ID: held.ID}); r.status != 200 {
		t.Fatal(r.raw)
	}
	rest, err := io.ReadAll(resp.Body)
	var env wire.Envelope
	if err != nil || json.Unmarshal(rest, &env) != nil || env.Lease == nil || env.Lease.Token <= held.Token {
		t.Fatalf("long-poll answer after the heartbeat: %q, %v", rest, err)
	}
	if env.Lease.WaitedMillis <= 0 {
		t.Errorf("waited_ms = %v", env.Lease.WaitedMillis)
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
	raw := waitRunsOutAfterHeartbeat(t, func(waitMs int64) (int, string) {
		r := ts2.acquire("", wire.AcquireRequest{Name: "lp2", WaitMillis: waitMs})
		return r.status, r.raw
	})
	var env wire.Envelope
	if json.Unmarshal([]byte(raw), &env) != nil || env.Error == nil || env.Error.Code != wire.CodeNotAcquired {
		t.Errorf("after heartbeats: %q", raw)
	}
	if st := ts2.describe("", "lp2"); len(st.Waiters) != 0 {
		t.Errorf("a waiter is left behind: %+v", st)
	}
}

// waitRunsOutAfterHeartbeat polls (a long poll on a name held throughout,
// against a server that beats every 30 ms) with longer and longer waits
// until one runs out after a heartbeat went out, and returns that answer:
// spaces, then the error, in a 200. On a loaded machine a wait may run out
// before the first heartbeat: its answer must then be a plain 409.
func waitRunsOutAfterHeartbeat(t *testing.T, poll func(waitMs int64) (status int, raw string)) string {
	t.Helper()
	for wait := int64(150); wait <= 60_000; wait *= 2 {
		switch status, raw := poll(wait); {
		case status == 200 && strings.HasPrefix(raw, " "):
			return raw
		case status != 409 || strings.HasPrefix(raw, " "):
			t.Fatalf("a wait of %d ms ran out: %d %q; want a 409, or spaces and the error in a 200", wait, status, raw)
		}
	}
	t.Fatal("no heartbeat before a wait of a minute ran out")
	return ""
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
	testenv.WaitFor(t, "waiter queued", func() bool { return len(ts.describe("", "ghost").Waiters) == 1 })
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the cancelled request succeeded")
	}
	testenv.WaitFor(t, "waiter dequeued", func() bool { return len(ts.describe("", "ghost").Waiters) == 0 })
	ts.do("POST", wire.PathRelease, "", wire.ReleaseRequest{Name: "ghost", ID: held.ID})
	if st := ts.describe("", "ghost"); len(st.Holders) != 0 || len(st.Waiters) != 0 {
		t.Fatalf("ghost state after release: %+v", st)
	}
}

// TestGrantRacingHangUp races a release (granting the waiter) with the
// waiter hanging up, many times: whichever wins, no permit stays held by
// nobody. The server gives back a grant it could not write
// (TestUndeliveredGrantGivenBack); one it wrote to a connection the
// client had just closed is the client's to give back, by its lease id,
// as the sema core does after an acquire cancelled in flight.
func TestGrantRacingHangUp(t *testing.T) {
	ts := newTS(t, nil, nil)
	var received, clientGaveBack int
	defer func() {
		t.Logf("of 30 races, the client received %d grants and gave back %d written after it hung up", received, clientGaveBack)
	}()
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
		testenv.WaitFor(t, "waiter queued", func() bool { return len(ts.describe("", "race").Waiters) == 1 })
		go ts.do("POST", wire.PathRelease, "", wire.ReleaseRequest{Name: "race", ID: held.ID})
		if i%3 != 0 {
			time.Sleep(time.Duration(i%5) * 50 * time.Microsecond) // varies the race; asserts nothing
		}
		cancel()
		l := <-got
		r := ts.do("POST", wire.PathRelease, "", wire.ReleaseRequest{Name: "race", ID: id})
		if l != nil {
			received++
			if r.status != 200 {
				t.Fatalf("release of a received grant: %d %s", r.status, r.raw)
			}
		} else if r.status == 200 {
			clientGaveBack++
		}
		testenv.WaitFor(t, "no ghost holder", func() bool {
			st := ts.describe("", "race")
			return len(st.Holders) == 0 && len(st.Waiters) == 0
		})
	}
}

// TestUndeliveredGrantGivenBack: a grant made for a long poll whose client
// has hung up is given back by the server: nobody else releases it. The
// engine is held so that the grant reaches the server's handler only
// after the server has seen the client go, on the embedded store (whose
// grants arrive by callback) and on a served backend (on a goroutine).
func TestUndeliveredGrantGivenBack(t *testing.T) {
	for _, engine := range []string{"store", "backend"} {
		t.Run(engine, func(t *testing.T) {
			g := &grantGate{id: "waiter", granted: make(chan struct{}), deliver: make(chan struct{})}
			var b sema.Backend
			if engine == "store" {
				st, err := store.Open(store.Config{Dir: t.TempDir(), Logger: quiet})
				if err != nil {
					t.Fatal(err)
				}
				b = &gatedStore{st, g}
			} else {
				m := mem.New()
				b = &gatedBackend{m, m, g}
			}
			polls := make(chan handled, 2)
			ts := startTS(t, nil, b, func(hs *http.Server) { hs.Handler = watchAcquires(hs.Handler, polls) })
			held := ts.mustAcquire("", wire.AcquireRequest{Name: "gb", ID: "holder"})
			<-polls // the holder's acquire

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			got := make(chan error, 1)
			go func() {
				body, _ := json.Marshal(wire.AcquireRequest{Name: "gb", ID: "waiter", WaitMillis: 60000})
				req, _ := http.NewRequestWithContext(ctx, "POST", ts.url+wire.PathAcquire, bytes.NewReader(body))
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
					err = fmt.Errorf("the client got an answer: %s", resp.Status)
				}
				got <- err
			}()
			poll := <-polls
			testenv.WaitFor(t, "waiter queued", func() bool { return len(ts.describe("", "gb").Waiters) == 1 })
			if r := ts.do("POST", wire.PathRelease, "", wire.ReleaseRequest{Name: "gb", ID: held.ID}); r.status != 200 {
				t.Fatalf("release: %d %s", r.status, r.raw)
			}
			<-g.granted // the engine granted the waiter, the server does not know yet
			cancel()
			if err := <-got; !errors.Is(err, context.Canceled) {
				t.Fatalf("the hung-up client: %v", err)
			}
			<-poll.ctx.Done() // the server saw the client go
			close(g.deliver)
			<-poll.returned
			if st := ts.describe("", "gb"); len(st.Holders) != 0 || len(st.Waiters) != 0 {
				t.Fatalf("after the hang-up, the grant nobody received is still held: %+v", st)
			}
		})
	}
}

// handled is one request as the server's handler saw it: its context, and
// a channel closed when the handler returned.
type handled struct {
	ctx      context.Context
	returned chan struct{}
}

// watchAcquires passes each acquire's context to seen before serving it.
func watchAcquires(h http.Handler, seen chan<- handled) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != wire.PathAcquire {
			h.ServeHTTP(w, r)
			return
		}
		c := handled{r.Context(), make(chan struct{})}
		seen <- c
		defer close(c.returned)
		h.ServeHTTP(w, r)
	})
}

// grantGate holds the grant of lease id on its way from the engine to the
// server: it signals granted, then waits for deliver.
type grantGate struct {
	id      string
	granted chan struct{}
	deliver chan struct{}
}

func (g *grantGate) hold() {
	close(g.granted)
	<-g.deliver
}

// gatedStore is the embedded store with a gate on one lease's grant.
type gatedStore struct {
	*store.Store
	g *grantGate
}

func (s *gatedStore) AcquireAsync(req sema.Request, who store.Caller, wait bool, done func(sema.Grant, error)) *store.Pending {
	if req.ID != s.g.id {
		return s.Store.AcquireAsync(req, who, wait, done)
	}
	return s.Store.AcquireAsync(req, who, wait, func(gr sema.Grant, err error) {
		go func() { // done runs on the store's goroutines: never block them
			if err == nil {
				s.g.hold()
			}
			done(gr, err)
		}()
	})
}

// gatedBackend is a served backend (sema serve --backend) with a gate on
// one lease's grant.
type gatedBackend struct {
	sema.Backend
	sema.Inspector
	g *grantGate
}

func (b *gatedBackend) Acquire(ctx context.Context, req sema.Request) (sema.Grant, error) {
	gr, err := b.Backend.(sema.Blocker).Acquire(ctx, req)
	if err == nil && req.ID == b.g.id {
		b.g.hold()
	}
	return gr, err
}

func TestShutdownAnswersWaitersClosed(t *testing.T) {
	ts := newTS(t, nil, nil)
	ts.mustAcquire("", wire.AcquireRequest{Name: "bye"})
	resp := make(chan reply, 1)
	go func() { resp <- ts.acquire("", wire.AcquireRequest{Name: "bye", WaitMillis: 60000}) }()
	testenv.WaitFor(t, "waiter queued", func() bool { return len(ts.describe("", "bye").Waiters) == 1 })
	ts.srv.Close()
	wantErr(t, <-resp, 503, wire.CodeClosed)
	wantErr(t, ts.acquire("", wire.AcquireRequest{Name: "new"}), 503, wire.CodeClosed)
	if r := ts.do("GET", wire.PathHealth, "", nil); r.status != 503 {
		t.Errorf("healthz while closing: %d", r.status)
	}
}
