package remote_test

import (
	"net"
	"testing"

	"github.com/sema-dev/sema/backend/remote"
	"github.com/sema-dev/sema/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// startServer starts `sema serve` (race-built when the tests are) on a
// fresh port and data directory, with extra flags; the test's cleanup
// kills it.
func startServer(t testing.TB, extra ...string) *testenv.Sema {
	t.Helper()
	return testenv.StartSema(t, testenv.SemaOptions{Args: extra})
}

// freeAddr returns a loopback address nobody listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// newBackend returns a client of s, closed by the test's cleanup.
func newBackend(t testing.TB, s *testenv.Sema, mod ...func(*remote.Config)) *remote.Backend {
	t.Helper()
	cfg := remote.Config{URL: s.URL}
	for _, m := range mod {
		m(&cfg)
	}
	b, err := remote.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}
