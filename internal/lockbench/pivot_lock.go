package lockbench

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/sema-dev/sema"
)

// semaLocker locks with sema: one client (one backend connection) per
// worker, as each worker process would have.
type semaLocker struct {
	c      *sema.Client
	prefix string
	sems   map[int]*sema.Semaphore
	shared bool // c belongs to the caller
}

// IsMemURL reports whether raw names the in-process memory backend, which
// workers of one process share and separate processes cannot.
func IsMemURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (strings.EqualFold(u.Scheme, "mem") || strings.EqualFold(u.Scheme, "memory"))
}

func newPivotLocker(ctx context.Context, kind string, open func(context.Context) (sema.Backend, error), dir, prefix string) (pivotLocker, error) {
	switch kind {
	case "flock":
		return &flockLocker{dir: dir}, nil
	case "none":
		return noLocker{}, nil
	}
	b, err := open(ctx)
	if err != nil {
		return nil, err
	}
	return &semaLocker{c: sema.New(b), prefix: prefix, sems: map[int]*sema.Semaphore{}}, nil
}

func (l *semaLocker) lock(ctx context.Context, key int) (time.Duration, func() error, error) {
	s := l.sems[key]
	if s == nil {
		name := l.prefix + "global"
		if key >= 0 {
			name = fmt.Sprintf("%sserver-%d", l.prefix, key)
		}
		s = l.c.Mutex(name)
		l.sems[key] = s
	}
	start := time.Now()
	lease, err := s.Acquire(ctx)
	wait := time.Since(start)
	if err != nil {
		return 0, nil, err
	}
	return wait, func() error { return lease.Release(context.Background()) }, nil
}

func (l *semaLocker) close() error {
	if l.shared {
		return nil
	}
	return l.c.Close()
}

// noLocker takes no lock at all: the tests use it to show that the lost
// update check of runPivot can fail.
type noLocker struct{}

func (noLocker) lock(context.Context, int) (time.Duration, func() error, error) {
	return 0, func() error { return nil }, nil
}

func (noLocker) close() error { return nil }
