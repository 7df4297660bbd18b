package server

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema/internal/store"
	"github.com/sema-dev/sema/internal/wire"
)

// TestLongPollOutlivesIdleTimeout: a long poll on a taken-over connection
// lasts longer than the connection's idle timeout (no heartbeat meanwhile):
// the client stays queued, gets its grant and keeps the connection.
func TestLongPollOutlivesIdleTimeout(t *testing.T) {
	st, err := store.Open(store.Config{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Backend: st, Logger: quiet, Heartbeat: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv)
	hs.Config.IdleTimeout = 100 * time.Millisecond
	hs.Config.ReadTimeout = 100 * time.Millisecond
	hs.Start()
	t.Cleanup(func() { srv.Close(); hs.Close(); st.Close() })
	ts := &tserver{t: t, url: hs.URL, srv: srv, st: st, hs: hs}

	c := dialRaw(t, ts)
	held := queueWaiter(t, ts, c, "h1/idle")
	time.Sleep(500 * time.Millisecond) // five idle timeouts
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
