//go:build !(linux || darwin || freebsd)

package lockbench

import (
	"context"
	"errors"
	"time"
)

// flockLocker is not available here.
type flockLocker struct{ dir string }

func (l *flockLocker) lock(context.Context, int) (time.Duration, func() error, error) {
	return 0, nil, errors.New("flock(2) baseline not available on this platform")
}

func (l *flockLocker) close() error { return nil }

type keptFlock struct{}

func openFlock(string) (*keptFlock, error) {
	return nil, errors.New("flock(2) baseline not available on this platform")
}

func (*keptFlock) lock(context.Context) (func() error, error) { return nil, errors.ErrUnsupported }

func (*keptFlock) close() error { return nil }
