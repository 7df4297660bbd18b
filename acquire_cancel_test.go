package sema_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/mem"
)

// hungRelease is a backend whose releases never answer until their context
// ends, as a server that stopped answering would.
type hungRelease struct{ *mem.Backend }

func (b hungRelease) Release(ctx context.Context, name, id string) error {
	<-ctx.Done()
	return errors.Join(sema.ErrUnavailable, ctx.Err())
}

// A wait that its context ends returns then: a Blocker gives back a grant
// that raced with the end itself, so the client does not release again
// (which, on a backend that does not answer, would take the release
// timeout).
func TestBlockingAcquireEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mem.New()
		if _, err := sema.New(m).Mutex("job").Acquire(t.Context()); err != nil {
			t.Fatal(err)
		}
		c := sema.New(hungRelease{m})
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.Mutex("job").Acquire(ctx)
		if !errors.Is(err, sema.ErrNotAcquired) {
			t.Fatalf("Acquire: %v, want ErrNotAcquired", err)
		}
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Errorf("Acquire returned after %v, want its context's 100ms", d)
		}
	})
}
