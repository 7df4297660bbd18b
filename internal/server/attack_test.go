package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sema-dev/sema/internal/testenv"
	"github.com/sema-dev/sema/internal/wire"
)

// The server under attack: clients that reset connections in the middle
// of answers, never read, pipeline past every buffer, flood it with
// waiters. Each attack must cost the attacker's own connections only, and
// the server's goroutines, descriptors and memory must come back to where
// they were.

// attackTS is a server with sema serve's timeouts, but a short write
// timeout, so that a client that does not read is closed quickly.
func attackTS(t *testing.T, write time.Duration, tweak ...func(*Config)) *tserver {
	t.Helper()
	return startTS(t, nil, nil, func(hs *http.Server) {
		hs.ReadHeaderTimeout, hs.ReadTimeout = 10*time.Second, 30*time.Second
		hs.WriteTimeout, hs.IdleTimeout = write, 2*time.Minute
	}, tweak...)
}

// footprint is what the process holds: goroutines, open descriptors and
// live heap.
type footprint struct {
	goroutines, fds int
	heap            uint64
}

func measure() footprint {
	http.DefaultClient.CloseIdleConnections()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	f := footprint{goroutines: runtime.NumGoroutine(), heap: ms.HeapAlloc}
	if des, err := os.ReadDir("/proc/self/fd"); err == nil {
		f.fds = len(des)
	}
	return f
}

// baseline measures the footprint once it has settled.
func baseline(t *testing.T) footprint {
	t.Helper()
	time.Sleep(50 * time.Millisecond)
	return measure()
}

// recovered waits until the footprint is back to base (the heap within
// slack).
func recovered(t *testing.T, base footprint, after string) {
	t.Helper()
	const slack = 8 << 20
	var f footprint
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if f = measure(); f.goroutines <= base.goroutines && f.fds <= base.fds && f.heap <= base.heap+slack {
			return
		}
	}
	buf := make([]byte, 1<<20)
	t.Fatalf("after %s: %d goroutines (were %d), %d descriptors (were %d), heap %d KiB (was %d)\n%s",
		after, f.goroutines, base.goroutines, f.fds, base.fds, f.heap>>10, base.heap>>10, buf[:runtime.Stack(buf, true)])
}

// reset closes c with a TCP reset.
func reset(c net.Conn) {
	_ = c.(*net.TCPConn).SetLinger(0)
	_ = c.Close()
}

// TestAttackMuxResetAfterRenews: sema-mux clients that take a lease,
// send renewals that each wait for an fsync, and reset the connection
// leave nothing behind.
func TestAttackMuxResetAfterRenews(t *testing.T) {
	ts := attackTS(t, 30*time.Second)
	base := baseline(t)
	for r := range 30 {
		m := mustUpgrade(t, ts, "")
		name := fmt.Sprintf("rst/%d", r)
		m.send(1, wire.MuxAcquire, `{"name":"`+name+`","id":"L","ttl_ms":1000}`)
		wantMux(t, m.next(), 1, 200, "")
		var frames []byte
		for i := range 200 {
			frames = wire.AppendMuxRequest(frames, uint32(2+i), wire.MuxRenew,
				fmt.Appendf(nil, `{"name":%q,"id":"L","ttl_ms":%d}`, name, 1001+i))
		}
		if _, err := m.nc.Write(frames); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		reset(m.nc)
	}
	recovered(t, base, "30 sema-mux connections reset during renewals")
}

// TestAttackMuxNoRead: a sema-mux client that sends megabytes of calls
// and never reads its answers is closed after the write timeout, and
// costs nothing once it is gone; meanwhile other clients are served.
func TestAttackMuxNoRead(t *testing.T) {
	ts := attackTS(t, 500*time.Millisecond)
	base := baseline(t)
	m := mustUpgrade(t, ts, "")
	frame := wire.AppendMuxRequest(nil, 1, wire.MuxRelease, []byte(`{"name":"nr","id":"nr1"}`))
	go func() { // blocks once the buffers are full
		for range 100_000 / 1000 {
			if _, err := m.nc.Write(bytes.Repeat(frame, 1000)); err != nil {
				return
			}
		}
	}()
	other := mustUpgrade(t, ts, "")
	other.send(9, wire.MuxAcquire, `{"name":"nr/other"}`)
	wantMux(t, other.next(), 9, 200, "")
	other.nc.Close()
	testenv.WaitFor(t, "the server closes the connection that does not read", func() bool {
		ts.srv.connMu.Lock()
		defer ts.srv.connMu.Unlock()
		return len(ts.srv.conns) == 0
	})
	m.nc.Close()
	recovered(t, base, "a sema-mux client that never read")
}

// smallRcvbuf dials the server with a small receive buffer, so that the
// server's writes to it block soon, and has one request answered (the
// connection is then in its steady state).
func smallRcvbuf(t *testing.T, ts *tserver) *rawConn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	nc, err := d.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	c := &rawConn{t: t, nc: nc, br: bufio.NewReaderSize(nc, 4096)}
	c.send(releaseZZ)
	c.read("POST")
	_ = nc.SetReadDeadline(time.Time{})
	return c
}

// peerWindowClosed reports whether the peer of c advertises a zero receive
// window while data waits to be sent: it does not read, and writes to it
// block once the send buffer is full.
func peerWindowClosed(t *testing.T, c net.Conn) bool {
	t.Helper()
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	var ierr error
	if err := rc.Control(func(fd uintptr) { info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
		t.Fatal(err)
	}
	if ierr != nil {
		t.Fatal(ierr)
	}
	return info.Snd_wnd == 0 && info.Notsent_bytes > 0
}

// releaseZZ is a release of a lease nobody holds: a ~100-byte answer.
var releaseZZ = rawPost(wire.PathRelease, "", `{"name":"zz","id":"zz"}`)

// notHeld counts the releases the server has answered not_held (from
// /metrics).
func notHeld(ts *tserver) int {
	r := ts.do("GET", wire.PathMetrics, "", nil)
	for line := range strings.Lines(r.raw) {
		if rest, ok := strings.CutPrefix(line, `sema_http_requests_total{code="not_held",route="release"} `); ok {
			n, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return int(n)
		}
	}
	return 0
}

// answeredBeforeBlocking is how many pipelined releases the server answers
// to a client that does not read before its writes block.
func answeredBeforeBlocking(t *testing.T, ts *tserver) int {
	t.Helper()
	c := smallRcvbuf(t, ts)
	before := notHeld(ts)
	go func() { _, _ = io.WriteString(c.nc, strings.Repeat(releaseZZ, 60_000)) }()
	time.Sleep(2 * time.Second)
	n := notHeld(ts) - before
	reset(c.nc)
	return n
}

// TestAttackHeadOfLine: clients that never read — one pipelining
// releases over HTTP/1.1, one flooding a sema-mux connection behind its
// waiting acquire of a hot name, until the server stops reading it — do
// not hold up another client's release of that name on another
// connection, which hands the name to the blocked sema-mux connection; a
// shutdown then completes within its budget (not after the write
// timeout).
func TestAttackHeadOfLine(t *testing.T) {
	const writeTimeout = 30 * time.Second
	ts := attackTS(t, writeTimeout)
	base := baseline(t)
	// A handoff first: the hot name's next handoffs are answered at once,
	// on the releasing goroutine.
	ts.mustAcquire("", wire.AcquireRequest{Name: "hol", ID: "H", TTLMillis: 60000})
	waiter := make(chan reply, 1)
	go func() {
		waiter <- ts.acquire("", wire.AcquireRequest{Name: "hol", ID: "W", TTLMillis: 60000, WaitMillis: 20000})
	}()
	testenv.WaitFor(t, "W queued", func() bool { return len(ts.describe("", "hol").Waiters) == 1 })
	ts.do("POST", wire.PathRelease, "", wire.ReleaseRequest{Name: "hol", ID: "H"})
	held := (<-waiter).env.Lease
	if held == nil {
		t.Fatal("the handoff to W failed")
	}
	piper := smallRcvbuf(t, ts)
	go func() { _, _ = io.WriteString(piper.nc, strings.Repeat(releaseZZ, 60_000)) }()
	flooder := mustUpgrade(t, ts, "")
	flooder.send(1, wire.MuxAcquire, `{"name":"hol","id":"X","ttl_ms":60000,"wait_ms":60000}`)
	testenv.WaitFor(t, "X queued", func() bool { return len(ts.describe("", "hol").Waiters) == 1 })
	frame := wire.AppendMuxRequest(nil, 2, wire.MuxRelease, []byte(`{"name":"zz","id":"zz"}`))
	go func() { // blocks once the server stops reading
		for range 100 {
			if _, err := flooder.nc.Write(bytes.Repeat(frame, 10_000)); err != nil {
				return
			}
		}
	}()
	testenv.WaitFor(t, "the server's writes to the flooder block", func() bool {
		ts.srv.connMu.Lock()
		defer ts.srv.connMu.Unlock()
		for m := range ts.srv.conns {
			m.wmu.Lock()
			writing := m.writing
			m.wmu.Unlock()
			if writing && peerWindowClosed(t, m.nc) {
				return true
			}
		}
		return false
	})
	victim := &http.Client{Timeout: testenv.HangGuard}
	defer victim.CloseIdleConnections()
	resp, err := victim.Post(ts.url+wire.PathRelease, "application/json",
		strings.NewReader(`{"name":"hol","id":"`+held.ID+`"}`))
	if err != nil {
		t.Fatalf("the victim's release on another connection: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the victim's release: %d", resp.StatusCode)
	}
	if st := ts.describe("", "hol"); len(st.Holders) != 1 || st.Holders[0].ID != "X" {
		t.Fatalf("after the victim's release: %+v; want X to hold the name", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	if err := ts.hs.Config.Shutdown(ctx); err != nil {
		ts.hs.Config.Close() // as sema serve does when its budget runs out
	}
	_ = ts.srv.Shutdown(ctx)
	if d := time.Since(start); d >= writeTimeout {
		t.Fatalf("shutdown took %v with a budget of 2s: it waited for the write timeout", d)
	}
	piper.nc.Close()
	flooder.nc.Close()
	victim.CloseIdleConnections()
	recovered(t, base, "clients that pipelined or flooded and never read")
}

// TestAttackResetMidAnswers: connections reset while their pipelined
// answers are being written, with a request cut in the middle, leave
// nothing behind.
func TestAttackResetMidAnswers(t *testing.T) {
	ts := attackTS(t, 30*time.Second)
	base := baseline(t)
	k := answeredBeforeBlocking(t, ts)
	var conns []*rawConn
	for r := range 10 {
		c := smallRcvbuf(t, ts)
		go func() { _, _ = io.WriteString(c.nc, strings.Repeat(releaseZZ, k-1-r%3)+releaseZZ[:20]) }()
		conns = append(conns, c)
	}
	time.Sleep(time.Second)
	for _, c := range conns {
		reset(c.nc)
	}
	recovered(t, base, "10 connections reset in the middle of answers")
}
