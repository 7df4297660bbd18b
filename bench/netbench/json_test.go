package netbench

import (
	"fmt"
	"github.com/sema-dev/sema/bench/internal/drive"
	"path/filepath"
	"testing"

	"github.com/sema-dev/sema/internal/testenv"
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
	type conn struct {
		*testenv.JSONClient
		acquire, release []byte
	}
	conns := make([]conn, clients)
	for w := range conns {
		c, err := testenv.DialJSON(s.url)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		name, lease := fmt.Sprintf("bench/json/%s/%d", id, w), fmt.Sprintf("w%d", w)
		conns[w] = conn{c, c.Post("/v1/acquire", fmt.Sprintf(`{"name":%q,"id":%q,"ttl_ms":15000}`, name, lease)),
			c.Post("/v1/release", fmt.Sprintf(`{"name":%q,"id":%q}`, name, lease))}
	}
	cpu := startCPU(s)
	elapsed := drive.Run(b, clients, func(w int) error {
		c := conns[w]
		if err := c.Call(c.acquire); err != nil {
			return err
		}
		return c.Call(c.release)
	})
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pairs/s")
	cpu.report(b)
}
