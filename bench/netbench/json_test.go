package netbench

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkJSON is the JSON API as the clients of other languages use it:
// 64 clients, each with its own keep-alive HTTP/1.1 connection and its
// own name, POST an acquire (a try) then a release, as fast as they can. Metric:
// pairs/s. "sema" is the server under test; "base", if
// SEMA_BENCH_BASE_BIN names another sema binary, the same load on it, in
// the same run.
func BenchmarkJSON(b *testing.B) {
	b.Run("sema", func(b *testing.B) {
		if srv == nil {
			b.Fatalf("no sema server: %v", srvErr)
		}
		jsonPairs(b, srv)
	})
	b.Run("base", func(b *testing.B) {
		if baseBin == "" {
			b.Skip("SEMA_BENCH_BASE_BIN not set")
		}
		s, err := startServerBin(baseBin, filepath.Join(b.TempDir(), "data"))
		if err != nil {
			b.Fatal(err)
		}
		defer s.kill()
		jsonPairs(b, s)
	})
}

// jsonPairs drives acquire+release pairs over plain HTTP/1.1 against s:
// each client writes its requests on its own keep-alive connection and
// reads the answers with net/http's parser, as a load generator (wrk, ab)
// would, so that the client's own cost stays small beside the server's.
func jsonPairs(b *testing.B, s *server) {
	id := runID()
	conns := make([]*jsonConn, clients)
	for w := range conns {
		c, err := dialJSON(s.url, fmt.Sprintf("bench/json/%s/%d", id, w), fmt.Sprintf("w%d", w))
		if err != nil {
			b.Fatal(err)
		}
		defer c.nc.Close()
		conns[w] = c
	}
	cpu := startCPU(s)
	elapsed := drive(b, clients, func(w int) error {
		c := conns[w]
		if err := c.call(c.acquire); err != nil {
			return err
		}
		return c.call(c.release)
	})
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pairs/s")
	cpu.report(b)
}

// jsonConn is one client's keep-alive connection and its two requests.
type jsonConn struct {
	nc               net.Conn
	br               *bufio.Reader
	acquire, release []byte
}

func dialJSON(url, name, id string) (*jsonConn, error) {
	host := strings.TrimPrefix(url, "http://")
	nc, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		return nil, err
	}
	req := func(path, body string) []byte {
		return fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			path, host, len(body), body)
	}
	return &jsonConn{nc: nc, br: bufio.NewReader(nc),
		acquire: req("/v1/acquire", fmt.Sprintf(`{"name":%q,"id":%q,"ttl_ms":15000}`, name, id)),
		release: req("/v1/release", fmt.Sprintf(`{"name":%q,"id":%q}`, name, id)),
	}, nil
}

// call sends one request and reads its answer, which must be a 200.
func (c *jsonConn) call(req []byte) error {
	if _, err := c.nc.Write(req); err != nil {
		return err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return err
}
