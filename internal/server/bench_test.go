package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sema-dev/sema/internal/testenv"
	"github.com/sema-dev/sema/internal/wire"
)

// loadClient is a lean HTTP client for the benchmarks: keep-alive
// connections, bodies marshalled once per request.
func loadClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns,
		DisableCompression: true}}
}

func post(c *http.Client, url string, body []byte) (wire.Envelope, error) {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return wire.Envelope{}, err
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	var env wire.Envelope
	if err == nil {
		err = json.Unmarshal(raw, &env)
	}
	if err == nil && env.Error != nil {
		err = fmt.Errorf("%s: %s", env.Error.Code, env.Error.Message)
	}
	return env, err
}

// cpuTime returns the user+system CPU time of process pid so far.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ = 100
}

// reportServerCPU reports the server process's CPU time per op.
func reportServerCPU(b *testing.B, p *testenv.Sema, before time.Duration) {
	b.ReportMetric(float64((cpuTime(p.PID())-before).Microseconds())/float64(b.N), "server-µs/op")
}

// runLoad runs clients goroutines, each calling op b.N/clients times.
func runLoad(b *testing.B, clients int, op func(client, i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	b.ResetTimer()
	start := time.Now()
	for cl := range clients {
		wg.Go(func() {
			for i := 0; next.Add(1) <= int64(b.N); i++ {
				if err := op(cl, i); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	if err := firstErr.Load(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "ops/s")
}

// BenchmarkServeDistinctNames: 64 clients, each acquiring and releasing
// its own name on a real `sema serve` process with its durable store. One
// op is an acquire+release pair.
func BenchmarkServeDistinctNames(b *testing.B) {
	const clients = 64
	p := testenv.StartSema(b, testenv.SemaOptions{})
	c := loadClient(clients)
	defer func(cpu time.Duration) { reportServerCPU(b, p, cpu) }(cpuTime(p.PID()))
	runLoad(b, clients, func(cl, i int) error {
		name := fmt.Sprintf("bench/distinct/%d", cl)
		env, err := post(c, p.URL+wire.PathAcquire, fmt.Appendf(nil, `{"name":%q,"ttl_ms":30000}`, name))
		if err != nil {
			return err
		}
		_, err = post(c, p.URL+wire.PathRelease, fmt.Appendf(nil, `{"name":%q,"id":%q}`, name, env.Lease.ID))
		return err
	})
}

// BenchmarkServeHotName: 64 clients long-polling one mutex; one op is a
// handoff (a grant to a waiter, then its release).
func BenchmarkServeHotName(b *testing.B) {
	const clients = 64
	p := testenv.StartSema(b, testenv.SemaOptions{})
	c := loadClient(clients)
	defer func(cpu time.Duration) { reportServerCPU(b, p, cpu) }(cpuTime(p.PID()))
	acq := []byte(`{"name":"bench/hot","ttl_ms":30000,"wait_ms":60000}`)
	runLoad(b, clients, func(cl, i int) error {
		env, err := post(c, p.URL+wire.PathAcquire, acq)
		if err != nil {
			return err
		}
		_, err = post(c, p.URL+wire.PathRelease, fmt.Appendf(nil, `{"name":"bench/hot","id":%q}`, env.Lease.ID))
		return err
	})
}

// BenchmarkInProcessDistinct is BenchmarkServeDistinctNames with the
// server in the benchmark's process (for profiling), driven by the JSON
// benchmark's client (bench/netbench), so that the profile shows the
// server rather than an HTTP client.
func BenchmarkInProcessDistinct(b *testing.B) {
	const clients = 64
	ts := newTS(b, nil, nil)
	type conn struct {
		*testenv.JSONClient
		acquire, release []byte
	}
	conns := make([]conn, clients)
	for i := range conns {
		c, err := testenv.DialJSON(ts.url)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		name := fmt.Sprintf("bench/distinct/%d", i)
		conns[i] = conn{c, c.Post(wire.PathAcquire, fmt.Sprintf(`{"name":%q,"id":"w%d","ttl_ms":15000}`, name, i)),
			c.Post(wire.PathRelease, fmt.Sprintf(`{"name":%q,"id":"w%d"}`, name, i))}
	}
	runLoad(b, clients, func(cl, i int) error {
		c := conns[cl]
		if err := c.Call(c.acquire); err != nil {
			return err
		}
		return c.Call(c.release)
	})
	reportStore(b, ts)
}

// BenchmarkInProcessDistinctWait is BenchmarkInProcessDistinct with the
// blocking acquire clients use (a long poll answered at once).
func BenchmarkInProcessDistinctWait(b *testing.B) {
	const clients = 64
	ts := newTS(b, nil, nil)
	c := loadClient(clients)
	runLoad(b, clients, func(cl, i int) error {
		name := fmt.Sprintf("bench/distinct/%d", cl)
		env, err := post(c, ts.url+wire.PathAcquire, fmt.Appendf(nil, `{"name":%q,"ttl_ms":30000,"wait_ms":60000}`, name))
		if err != nil {
			return err
		}
		_, err = post(c, ts.url+wire.PathRelease, fmt.Appendf(nil, `{"name":%q,"id":%q}`, name, env.Lease.ID))
		return err
	})
	reportStore(b, ts)
}

func BenchmarkInProcessSerial(b *testing.B) {
	ts := newTS(b, nil, nil)
	c := loadClient(1)
	runLoad(b, 1, func(cl, i int) error {
		env, err := post(c, ts.url+wire.PathAcquire, []byte(`{"name":"serial","ttl_ms":30000}`))
		if err != nil {
			return err
		}
		_, err = post(c, ts.url+wire.PathRelease, fmt.Appendf(nil, `{"name":"serial","id":%q}`, env.Lease.ID))
		return err
	})
}

func reportStore(b *testing.B, ts *tserver) {
	st := ts.st.Stats()
	if st.Syncs > 0 {
		b.ReportMetric(float64(st.Records)/float64(st.Syncs), "records/fsync")
		b.ReportMetric(float64(st.SyncTime.Microseconds())/float64(st.Syncs), "µs/fsync")
	}
	if st.Handoffs > 0 {
		b.ReportMetric(float64(st.EarlyHandoffs)/float64(st.Handoffs), "early-handoffs")
	}
}

func BenchmarkInProcessHot(b *testing.B) {
	const clients = 64
	ts := newTS(b, nil, nil)
	c := loadClient(clients)
	acq := []byte(`{"name":"bench/hot","ttl_ms":30000,"wait_ms":60000}`)
	runLoad(b, clients, func(cl, i int) error {
		env, err := post(c, ts.url+wire.PathAcquire, acq)
		if err != nil {
			return err
		}
		_, err = post(c, ts.url+wire.PathRelease, fmt.Appendf(nil, `{"name":"bench/hot","id":%q}`, env.Lease.ID))
		return err
	})
	reportStore(b, ts)
}
