package server

import (
	"fmt"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/sema-dev/sema/internal/testenv"
	"github.com/sema-dev/sema/internal/wire"
)

// floodMux sends n waiting acquires, with tags from first, on the names
// holdFlood holds.
func floodMux(t *testing.T, m *muxClient, first uint32, n int) {
	t.Helper()
	var frames []byte
	for i := range n {
		frames = wire.AppendMuxRequest(frames, first+uint32(i), wire.MuxAcquire,
			fmt.Appendf(nil, `{"name":"flood/%d","id":"w%p-%d","wait_ms":600000}`, i%10, m, i))
	}
	if _, err := m.nc.Write(frames); err != nil {
		t.Fatal(err)
	}
}

// holdFlood holds the names floodMux waits for.
func holdFlood(t *testing.T, ts *tserver, token string) {
	t.Helper()
	for i := range 10 {
		ts.mustAcquire(token, wire.AcquireRequest{Name: fmt.Sprintf("flood/%d", i), TTLMillis: 600000})
	}
}

// refusals reads n answers and checks each is a 429 of code.
func refusals(t *testing.T, m *muxClient, n int, code string) {
	t.Helper()
	for range n {
		a := m.next()
		wantMux(t, a, a.tag, http.StatusTooManyRequests, code)
	}
}

// TestWaitersBounded: waiting acquires are bounded per principal and
// overall, sema-mux connections per principal; the excess is refused 429
// (too_many_waiters, too_many_connections), over sema-mux and HTTP alike,
// and everything is given back once the clients leave.
func TestWaitersBounded(t *testing.T) {
	ts := newTS(t, testTokens, nil, func(c *Config) {
		c.MaxWaiters, c.MaxWaitersPerPrincipal, c.MaxConnsPerPrincipal = 150, 100, 2
	})
	holdFlood(t, ts, adminTok)
	base := baseline(t)

	alice := mustUpgrade(t, ts, aliceTok)
	floodMux(t, alice, 1, 120)
	refusals(t, alice, 20, wire.CodeTooManyWaiters)
	wantErr(t, ts.acquire(aliceTok, wire.AcquireRequest{Name: "flood/0", WaitMillis: 1000}), 429, wire.CodeTooManyWaiters)
	// A try is not a waiter.
	wantErr(t, ts.acquire(aliceTok, wire.AcquireRequest{Name: "flood/0"}), 409, wire.CodeNotAcquired)

	bob := mustUpgrade(t, ts, bobTok)
	floodMux(t, bob, 1, 60)
	refusals(t, bob, 10, wire.CodeTooManyWaiters) // 150 overall
	if n := ts.st.Stats().Waiters; n != 150 {
		t.Fatalf("%d waiters, want 150", n)
	}

	second := mustUpgrade(t, ts, aliceTok)
	req, _ := http.NewRequest("GET", ts.url+wire.PathMux, nil)
	req.Header.Set("Authorization", "Bearer "+aliceTok)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", wire.MuxProtocol)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a third sema-mux connection of one token: %d, want 429", resp.StatusCode)
	}
	for _, m := range []*muxClient{alice, bob, second} {
		m.nc.Close()
	}
	testenv.WaitFor(t, "waiters gone", func() bool { return ts.st.Stats().Waiters == 0 })
	if _, m := upgrade(t, ts, aliceTok, ""); m == nil {
		t.Fatal("no sema-mux connection once the others closed")
	} else {
		m.nc.Close()
	}
	recovered(t, base, "a flood of waiters")
}

// TestMuxCallsPerConnectionBounded: a call beyond a connection's bound on
// calls in flight is refused 429 too_many_waiters, as the framing says.
func TestMuxCallsPerConnectionBounded(t *testing.T) {
	ts := newTS(t, nil, nil, func(c *Config) { c.MaxWaitersPerPrincipal = wire.MuxMaxCalls + 10 })
	holdFlood(t, ts, "")
	m := mustUpgrade(t, ts, "")
	floodMux(t, m, 1, wire.MuxMaxCalls+1)
	a := m.next()
	wantMux(t, a, wire.MuxMaxCalls+1, http.StatusTooManyRequests, wire.CodeTooManyWaiters)
}

// TestFloodMemoryGivenBack: the memory a crowd of waiters took is given
// back to the system once they have left.
func TestFloodMemoryGivenBack(t *testing.T) {
	ts := newTS(t, nil, nil)
	holdFlood(t, ts, "")
	base := baseline(t)
	m := mustUpgrade(t, ts, "")
	const crowd = 2 * trimWaiters
	floodMux(t, m, 1, crowd)
	testenv.WaitFor(t, "the crowd waits", func() bool { return ts.st.Stats().Waiters == crowd })
	m.nc.Close()
	testenv.WaitFor(t, "the crowd is gone", func() bool { return ts.st.Stats().Waiters == 0 })
	recovered(t, base, "a crowd of waiters")
	var ms runtime.MemStats
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		runtime.ReadMemStats(&ms)
		if kept := ms.HeapIdle - ms.HeapReleased; kept < 16<<20 || time.Now().After(deadline) {
			if kept >= 16<<20 {
				t.Fatalf("%d MiB of free heap kept from the system", kept>>20)
			}
			break
		}
	}
}
