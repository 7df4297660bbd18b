package redis_test

import (
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backendtest"
	"github.com/sema-dev/sema/internal/testenv"
)

func conformance(t *testing.T, url string) {
	backendtest.Run(t, backendtest.Config{
		New:  func(t *testing.T) sema.Backend { return open(t, url) },
		Peer: func(t *testing.T, _ sema.Backend) sema.Backend { return open(t, url) },
		Reopen: func(t *testing.T, b sema.Backend) sema.Backend {
			_ = b.Close()
			return open(t, url)
		},
		// A client subscribes to force-release messages in the background.
		ForceNoticeAfter: time.Second,
	})
}

func TestConformance(t *testing.T) { conformance(t, testenv.SharedRedis(t).URL()) }

func TestConformanceCluster(t *testing.T) { conformance(t, testenv.SharedRedisCluster(t).URL()) }
