package server

import (
	"bufio"
	"context"
	be "encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema/backend/mem"
	"github.com/sema-dev/sema/internal/testenv"
	"github.com/sema-dev/sema/internal/wire"
)

// muxClient speaks sema-mux/1 frames over one upgraded connection.
type muxClient struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

type muxAnswer struct {
	tag    uint32
	status int
	body   string
}

// upgrade opens a connection and asks for sema-mux/1 with token; it
// returns the status of the answer and, on 101, the client.
func upgrade(t *testing.T, ts *tserver, token, extra string) (int, *muxClient) {
	t.Helper()
	c := dialRaw(t, ts)
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	if extra == "" {
		extra = "Connection: Upgrade\r\nUpgrade: " + wire.MuxProtocol + "\r\n"
	}
	c.send("GET " + wire.PathMux + " HTTP/1.1\r\nHost: sema\r\n" + auth + extra + "\r\n")
	resp, _ := c.read("GET")
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return resp.StatusCode, nil
	}
	return resp.StatusCode, &muxClient{t: t, nc: c.nc, br: c.br}
}

func mustUpgrade(t *testing.T, ts *tserver, token string) *muxClient {
	t.Helper()
	status, m := upgrade(t, ts, token, "")
	if m == nil {
		t.Fatalf("upgrade: %d", status)
	}
	return m
}

func (m *muxClient) send(tag uint32, op byte, body string) {
	m.t.Helper()
	if _, err := m.nc.Write(wire.AppendMuxRequest(nil, tag, op, []byte(body))); err != nil {
		m.t.Fatal(err)
	}
}

// next reads the next answer.
func (m *muxClient) next() muxAnswer {
	m.t.Helper()
	a, err := m.tryNext(testenv.HangGuard)
	if err != nil {
		m.t.Fatal(err)
	}
	return a
}

func (m *muxClient) tryNext(d time.Duration) (muxAnswer, error) {
	_ = m.nc.SetReadDeadline(time.Now().Add(d))
	var h [wire.MuxAnswerHead]byte
	if _, err := io.ReadFull(m.br, h[:]); err != nil {
		return muxAnswer{}, err
	}
	tag, status, n, err := wire.ParseMuxAnswerHead(h[:])
	if err != nil {
		return muxAnswer{}, err
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(m.br, b); err != nil {
		return muxAnswer{}, err
	}
	return muxAnswer{tag, status, string(b)}, nil
}

// answers reads n answers, by tag.
func (m *muxClient) answers(n int) map[uint32]muxAnswer {
	m.t.Helper()
	got := map[uint32]muxAnswer{}
	for range n {
		a := m.next()
		if _, dup := got[a.tag]; dup {
			m.t.Fatalf("two answers for tag %d", a.tag)
		}
		got[a.tag] = a
	}
	return got
}

// closed reports whether the server closed the connection.
func (m *muxClient) closed() bool {
	m.t.Helper()
	_, err := m.tryNext(testenv.HangGuard)
	return err == io.EOF || err != nil && strings.Contains(err.Error(), "reset")
}

func wantMux(t *testing.T, a muxAnswer, tag uint32, status int, code string) {
	t.Helper()
	if a.tag != tag || a.status != status || (code != "" && !strings.Contains(a.body, `"code":"`+code+`"`)) {
		t.Fatalf("answer %d %d %q; want tag %d, %d %s", a.tag, a.status, a.body, tag, status, code)
	}
}

func TestMuxUpgrade(t *testing.T) {
	ts := newTS(t, testTokens, nil)
	if status, _ := upgrade(t, ts, "", ""); status != 401 {
		t.Fatalf("no token: %d", status)
	}
	if status, _ := upgrade(t, ts, unknownTk, ""); status != 401 {
		t.Fatalf("unknown token: %d", status)
	}
	if status, _ := upgrade(t, ts, aliceTok, "Upgrade: websocket\r\nConnection: Upgrade\r\n"); status != 400 {
		t.Fatalf("other protocol: %d", status)
	}
	if status, _ := upgrade(t, ts, aliceTok, "Upgrade: "+wire.MuxProtocol+"\r\n"); status != 400 {
		t.Fatalf("without Connection: Upgrade: %d", status)
	}
	r := ts.do("POST", wire.PathMux, aliceTok, "{}")
	wantErr(t, r, 405, wire.CodeMethod)
	mustUpgrade(t, ts, aliceTok)
}

// TestMuxCalls drives acquire, renew, release and a handoff between two
// polls of one connection, with the token of the upgrade as the caller.
func TestMuxCalls(t *testing.T) {
	ts := newTS(t, testTokens, nil)
	m := mustUpgrade(t, ts, aliceTok)
	m.send(1, wire.MuxAcquire, `{"name":"mux/a","id":"`+strings.Repeat("a", 16)+`","ttl_ms":5000}`)
	a := m.next()
	wantMux(t, a, 1, 200, "")
	l := leaseIn(t, a.body)
	m.send(2, wire.MuxRenew, `{"name":"mux/a","id":"`+l.ID+`","ttl_ms":9000}`)
	wantMux(t, m.next(), 2, 200, "")
	m.send(3, wire.MuxAcquire, `{"name":"mux/a","id":"`+strings.Repeat("b", 16)+`","wait_ms":20000}`)
	testenv.WaitFor(t, "poll queued", func() bool { return len(ts.describe(adminTok, "mux/a").Waiters) == 1 })

	// Another token may not release alice's lease: to it, the id is
	// unknown.
	bob := mustUpgrade(t, ts, bobTok)
	bob.send(7, wire.MuxRelease, `{"name":"mux/a","id":"`+l.ID+`"}`)
	wantMux(t, bob.next(), 7, 404, wire.CodeNotHeld)

	m.send(4, wire.MuxRelease, `{"name":"mux/a","id":"`+l.ID+`"}`)
	got := m.answers(2)
	wantMux(t, got[4], 4, 200, "")
	wantMux(t, got[3], 3, 200, "")
	if l2 := leaseIn(t, got[3].body); l2.ID != strings.Repeat("b", 16) || l2.Token <= l.Token {
		t.Fatalf("handoff: %+v after %+v", l2, l)
	}
	// Errors are the envelopes of the HTTP API.
	m.send(5, wire.MuxAcquire, `{"name":""}`)
	wantMux(t, m.next(), 5, 400, wire.CodeInvalidName)
	m.send(6, wire.MuxRelease, `{"name":"mux/a","id":"`+strings.Repeat("c", 16)+`"}`)
	wantMux(t, m.next(), 6, 404, wire.CodeNotHeld)
	m.send(3, wire.MuxAcquire, `{"name":"mux/a","id":"`+strings.Repeat("d", 16)+`","wait_ms":100}`)
	wantMux(t, m.next(), 3, 409, wire.CodeNotAcquired)
}

// TestMuxCancel: a cancelled poll is dequeued and answered 499; a cancel
// of a tag not in flight is ignored.
func TestMuxCancel(t *testing.T) {
	for _, backend := range []string{"store", "mem"} {
		t.Run(backend, func(t *testing.T) {
			ts := muxTS(t, backend)
			m := mustUpgrade(t, ts, "")
			m.send(1, wire.MuxAcquire, `{"name":"mux/c"}`)
			l := leaseIn(t, m.next().body)
			m.send(2, wire.MuxAcquire, `{"name":"mux/c","wait_ms":20000}`)
			testenv.WaitFor(t, "poll queued", func() bool { return len(ts.describe("", "mux/c").Waiters) == 1 })
			m.send(9, wire.MuxCancel, "")
			m.send(2, wire.MuxCancel, "")
			wantMux(t, m.next(), 2, wire.MuxStatusCancelled, wire.CodeNotAcquired)
			if w := ts.describe("", "mux/c").Waiters; len(w) != 0 {
				t.Fatalf("waiters after cancel: %v", w)
			}
			m.send(3, wire.MuxRelease, `{"name":"mux/c","id":"`+l.ID+`"}`)
			wantMux(t, m.next(), 3, 200, "")
		})
	}
}

// muxTS is a server over the embedded store or over mem (whose polls run
// on goroutines).
func muxTS(t *testing.T, backend string) *tserver {
	if backend == "mem" {
		return newTS(t, nil, mem.New())
	}
	return newTS(t, nil, nil)
}

// TestMuxHangUp: the polls of a connection that closes are dequeued; one
// that half-closes gets its polls answered 499, then EOF.
func TestMuxHangUp(t *testing.T) {
	for _, backend := range []string{"store", "mem"} {
		t.Run(backend, func(t *testing.T) {
			ts := muxTS(t, backend)
			holder := mustUpgrade(t, ts, "")
			holder.send(1, wire.MuxAcquire, `{"name":"mux/h"}`)
			l := leaseIn(t, holder.next().body)

			gone := mustUpgrade(t, ts, "")
			gone.send(1, wire.MuxAcquire, `{"name":"mux/h","wait_ms":20000}`)
			half := mustUpgrade(t, ts, "")
			half.send(1, wire.MuxAcquire, `{"name":"mux/h","wait_ms":20000}`)
			testenv.WaitFor(t, "polls queued", func() bool { return len(ts.describe("", "mux/h").Waiters) == 2 })
			gone.nc.Close()
			testenv.WaitFor(t, "poll dequeued", func() bool { return len(ts.describe("", "mux/h").Waiters) == 1 })
			if err := half.nc.(*net.TCPConn).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			wantMux(t, half.next(), 1, wire.MuxStatusCancelled, "")
			if !half.closed() {
				t.Fatal("half-closed connection not closed after its last answer")
			}
			if w := ts.describe("", "mux/h").Waiters; len(w) != 0 {
				t.Fatalf("waiters: %v", w)
			}
			holder.send(2, wire.MuxRelease, `{"name":"mux/h","id":"`+l.ID+`"}`)
			wantMux(t, holder.next(), 2, 200, "")
			if st := ts.describe("", "mux/h"); len(st.Holders) != 0 {
				t.Fatalf("ghost grant: %+v", st.Holders)
			}
		})
	}
}

// TestMuxBadFrames: a frame that cannot be parsed closes the connection;
// the server serves on.
func TestMuxBadFrames(t *testing.T) {
	ts := newTS(t, nil, nil)
	huge := be.BigEndian.AppendUint32(nil, wire.MuxRequestHead+wire.MaxBodyBytes)
	cases := map[string][]byte{
		"too long":   append(huge, 0, 0, 0, 1, wire.MuxAcquire),
		"too short":  {0, 0, 0, 1, 0, 0, 0, 1, wire.MuxAcquire},
		"unknown op": wire.AppendMuxRequest(nil, 1, 99, nil),
		"op zero":    wire.AppendMuxRequest(nil, 1, 0, nil),
		"dup tag": append(wire.AppendMuxRequest(nil, 5, wire.MuxAcquire, []byte(`{"name":"mux/b","wait_ms":9000}`)),
			wire.AppendMuxRequest(nil, 5, wire.MuxAcquire, []byte(`{"name":"mux/b","wait_ms":9000}`))...),
		"http": []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
	}
	m0 := mustUpgrade(t, ts, "")
	m0.send(1, wire.MuxAcquire, `{"name":"mux/b"}`)
	wantMux(t, m0.next(), 1, 200, "")
	for name, frame := range cases {
		t.Run(name, func(t *testing.T) {
			m := mustUpgrade(t, ts, "")
			if _, err := m.nc.Write(frame); err != nil {
				t.Fatal(err)
			}
			for {
				a, err := m.tryNext(testenv.HangGuard)
				if err != nil {
					break // closed
				}
				if a.status == 200 {
					t.Fatalf("answered %+v", a)
				}
			}
		})
	}
	testenv.WaitFor(t, "dup-tag poll dequeued", func() bool { return len(ts.describe("", "mux/b").Waiters) == 0 })
	// Bodies the handlers refuse get the HTTP API's answers.
	m := mustUpgrade(t, ts, "")
	m.send(1, wire.MuxAcquire, `{"name":`)
	wantMux(t, m.next(), 1, 400, wire.CodeBadRequest)
	m.send(2, wire.MuxRenew, `{"name":"mux/b","id":"x","ttl_ms":-1}`)
	if a := m.next(); a.tag != 2 || a.status != 400 {
		t.Fatalf("bad renew: %+v", a)
	}
	if r := ts.do("GET", wire.PathHealth, "", nil); r.status != 200 {
		t.Fatalf("health after bad frames: %d", r.status)
	}
}

// TestMuxShutdown: a shutdown answers the polls "closed" and closes the
// connection.
func TestMuxShutdown(t *testing.T) {
	ts := newTS(t, nil, nil)
	m := mustUpgrade(t, ts, "")
	m.send(1, wire.MuxAcquire, `{"name":"mux/s"}`)
	m.next()
	m.send(2, wire.MuxAcquire, `{"name":"mux/s","wait_ms":60000}`)
	testenv.WaitFor(t, "poll queued", func() bool { return len(ts.describe("", "mux/s").Waiters) == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	wantMux(t, m.next(), 2, 503, wire.CodeClosed)
	if !m.closed() {
		t.Fatal("connection open after shutdown")
	}
}

// TestMuxManyPolls queues polls on many names from one connection and
// hands each over, checking every answer arrives once, under its tag.
func TestMuxManyPolls(t *testing.T) {
	ts := newTS(t, nil, nil)
	m := mustUpgrade(t, ts, "")
	const n = 200
	ids := map[uint32]string{}
	for i := range n {
		m.send(uint32(i), wire.MuxAcquire, fmt.Sprintf(`{"name":"mux/many/%d"}`, i))
	}
	for tag, a := range m.answers(n) {
		ids[tag] = leaseIn(t, a.body).ID
	}
	for i := range n {
		m.send(uint32(n+i), wire.MuxAcquire, fmt.Sprintf(`{"name":"mux/many/%d","wait_ms":20000}`, i))
	}
	testenv.WaitFor(t, "polls queued", func() bool { return len(ts.describe("", "mux/many/199").Waiters) == 1 })
	for i := range n {
		m.send(uint32(2*n+i), wire.MuxRelease, fmt.Sprintf(`{"name":"mux/many/%d","id":%q}`, i, ids[uint32(i)]))
	}
	got := m.answers(2 * n)
	for i := range n {
		wantMux(t, got[uint32(n+i)], uint32(n+i), 200, "")
		wantMux(t, got[uint32(2*n+i)], uint32(2*n+i), 200, "")
		var env wire.Envelope
		if json.Unmarshal([]byte(got[uint32(n+i)].body), &env) != nil || env.Lease == nil || env.Lease.Name != fmt.Sprintf("mux/many/%d", i) {
			t.Fatalf("poll %d: %q", i, got[uint32(n+i)].body)
		}
	}
}

// TestMuxIdleTimeout: a connection that carries calls stays open past the
// idle timeout, one with polls in flight too; an idle one is closed. The
// timeout counts from the last bytes read (re-armed once less than half of
// it is left): a round in which the busy connection, closed, had gone
// quiet for half the timeout (a stalled machine) proves nothing and is
// repeated.
func TestMuxIdleTimeout(t *testing.T) {
	const idleTimeout = time.Second
	ts := timedTS(t, idleTimeout, time.Second, time.Second)
	for round := 0; round < 5; round++ {
		if muxIdleRound(t, ts, fmt.Sprintf("mux/idle%d", round), idleTimeout) {
			return
		}
	}
	t.Fatal("the machine stalled in every round")
}

// muxIdleRound runs one round of TestMuxIdleTimeout on name; false: the
// round proves nothing.
func muxIdleRound(t *testing.T, ts *tserver, name string, idleTimeout time.Duration) bool {
	busy, polling, idle := mustUpgrade(t, ts, ""), mustUpgrade(t, ts, ""), mustUpgrade(t, ts, "")
	defer busy.nc.Close()
	defer polling.nc.Close()
	busy.send(1, wire.MuxAcquire, `{"name":"`+name+`"}`)
	l := leaseIn(t, busy.next().body)
	polling.send(1, wire.MuxAcquire, `{"name":"`+name+`","wait_ms":600000}`)
	idleClosed := make(chan bool, 1)
	go func() { idleClosed <- idle.closed() }()
	var quiet time.Duration // the longest time busy sent nothing
	last := time.Now()
	for tag := uint32(2); ; tag++ {
		select {
		case closed := <-idleClosed:
			if !closed {
				t.Fatal("idle connection still open")
			}
			busy.send(1000, wire.MuxRelease, `{"name":"`+name+`","id":"`+l.ID+`"}`)
			wantMux(t, busy.next(), 1000, 200, "")
			wantMux(t, polling.next(), 1, 200, "")
			return true
		default:
		}
		busy.send(tag, wire.MuxRenew, `{"name":"`+name+`","id":"`+l.ID+`","ttl_ms":60000}`)
		a, err := busy.tryNext(testenv.HangGuard)
		quiet, last = max(quiet, time.Since(last)), time.Now()
		if err == nil {
			wantMux(t, a, tag, 200, "")
			continue
		}
		if quiet < idleTimeout/2 {
			t.Fatalf("a connection that sent a call at least every %v was closed: %v", quiet, err)
		}
		t.Logf("the busy connection went quiet for %v (a stalled machine) and was closed: again", quiet)
		return false
	}
}
