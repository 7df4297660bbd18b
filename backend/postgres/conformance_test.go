package postgres_test

import (
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/postgres"
	"github.com/sema-dev/sema/backendtest"
)

// conformance runs the suite on backends of cfg: each subtest gets its own
// backend and a peer (another backend on the same tables, as another
// process has).
func conformance(t *testing.T, cfg func(t *testing.T) postgres.Config) {
	backendtest.Run(t, backendtest.Config{
		New:  func(t *testing.T) sema.Backend { return open(t, cfg(t)) },
		Peer: func(t *testing.T, _ sema.Backend) sema.Backend { return open(t, cfg(t)) },
		TTL:  time.Second,
		Reopen: func(t *testing.T, b sema.Backend) sema.Backend {
			if err := b.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return open(t, cfg(t))
		},
		// A holder's listen connection opens in the background.
		ForceNoticeAfter: 2 * time.Second,
	})
}

func TestConformance(t *testing.T) {
	conformance(t, func(t *testing.T) postgres.Config { return shared(t) })
	checkSums(t, shared(t).URL, postgres.DefaultTablePrefix)
}
