package sema_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/mem"
)

// byDeadline is a backend outside the process (as far as the client can
// tell) that releases by deadline: its first releases fail as unavailable.
type byDeadline struct {
	*mem.Backend
	t         *testing.T
	mu        sync.Mutex
	fail      int // releases still to fail
	deadlines []time.Time
}

func (b *byDeadline) Guarantees() sema.Guarantees {
	g := b.Backend.Guarantees()
	g.Scope = sema.ScopeHost
	return g
}

func (b *byDeadline) Release(context.Context, string, string) error {
	b.t.Error("Release called; want ReleaseBy")
	return sema.ErrUnavailable
}

func (b *byDeadline) ReleaseBy(ctx context.Context, name, id string, deadline time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.deadlines = append(b.deadlines, deadline)
	if ctx.Err() != nil {
		b.t.Error("ReleaseBy got a cancelled context")
	}
	if b.fail > 0 {
		b.fail--
		return sema.ErrUnavailable
	}
	return b.Backend.Release(ctx, name, id)
}

// Release uses a backend's ReleaseBy with one deadline, the release timeout
// from the call, retries transient errors until then, and gives up then.
func TestReleaseByDeadline(t *testing.T) {
	for _, fail := range []int{2, 1000} {
		synctest.Test(t, func(t *testing.T) {
			b := &byDeadline{Backend: mem.New(), t: t, fail: fail}
			c := sema.New(b, sema.WithReleaseTimeout(time.Second))
			l, err := c.Mutex("x").Acquire(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			cancel() // the caller's context has ended: Release goes on
			start := time.Now()
			err = l.Release(ctx)
			if fail < 100 {
				if err != nil || len(b.deadlines) != fail+1 {
					t.Fatalf("Release = %v after %d calls; want nil after %d", err, len(b.deadlines), fail+1)
				}
			} else if !errors.Is(err, sema.ErrUnavailable) || time.Since(start) != time.Second {
				t.Fatalf("Release = %v after %v; want ErrUnavailable after the 1s timeout", err, time.Since(start))
			}
			for _, d := range b.deadlines {
				if !d.Equal(start.Add(time.Second)) {
					t.Fatalf("deadline %v, want %v", d, start.Add(time.Second))
				}
			}
		})
	}
}
