package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/etcd"
	"github.com/sema-dev/sema/backendtest"
	"github.com/sema-dev/sema/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// open opens a backend on the cluster, with a prefix of its own per test
// when prefix is set, or fails the test.
func open(t testing.TB, c *testenv.EtcdCluster, prefix string) *etcd.Backend {
	t.Helper()
	cfg := etcd.Config{Endpoints: c.Endpoints(), Prefix: prefix}
	b, err := etcd.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return b
}

func TestConformance(t *testing.T) {
	c := testenv.SharedEtcd(t)
	backendtest.Run(t, backendtest.Config{
		New: func(t *testing.T) sema.Backend { return open(t, c, "") },
		// etcd expires leases by whole seconds, checking every 500ms.
		TTL: time.Second,
		// Another client of the same cluster, as another process has.
		Peer: func(t *testing.T, b sema.Backend) sema.Backend { return open(t, c, "") },
		Reopen: func(t *testing.T, b sema.Backend) sema.Backend {
			if err := b.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return open(t, c, "")
		},
	})
}
