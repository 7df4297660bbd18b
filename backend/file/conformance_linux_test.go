package file_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/file"
	"github.com/sema-dev/sema/backendtest"
)

// quiet drops the backend's warnings (repairs are expected in tests).
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// open opens dir or fails the test.
func open(t testing.TB, dir string) *file.Backend {
	t.Helper()
	b, err := file.Open(dir, &file.Config{IdleClose: 200 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatalf("Open(%q): %v", dir, err)
	}
	return b
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Config{
		New: func(t *testing.T) sema.Backend { return open(t, t.TempDir()) },
		// A 1s TTL leaves the core a 200ms margin: the 400ms default (80ms)
		// is within the scheduling stalls of a loaded 2-core CI machine.
		TTL: time.Second,
		// Another handle on the same directory, as another process has: its
		// own files, liveness slots and inotify instance.
		Peer: func(t *testing.T, b sema.Backend) sema.Backend { return open(t, b.(*file.Backend).Dir()) },
		// Closing a handle ends its leases, as its process's exit does.
		ReopenEndsLeases: true,
		// The janitor readies a holder's doorbell within a second.
		ForceNoticeAfter: 2 * time.Second,
		Reopen: func(t *testing.T, b sema.Backend) sema.Backend {
			dir := b.(*file.Backend).Dir()
			if err := b.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return open(t, dir)
		},
	})
}
