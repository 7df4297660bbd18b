//go:build !linux

package file

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sema-dev/sema"
)

// Backend is the file backend. It needs Linux (open file description locks
// and inotify); elsewhere [Open] fails with errors.ErrUnsupported.
type Backend struct{}

var errUnsupported = fmt.Errorf("file: the file:// backend needs Linux: %w", errors.ErrUnsupported)

// Open fails: the file backend needs Linux.
func Open(dir string, cfg *Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return nil, errUnsupported
}

// TryAcquire fails with errors.ErrUnsupported.
func (*Backend) TryAcquire(context.Context, sema.Request) (sema.Grant, error) {
	return sema.Grant{}, errUnsupported
}

// Renew fails with errors.ErrUnsupported.
func (*Backend) Renew(context.Context, string, string, time.Duration) (sema.Grant, error) {
	return sema.Grant{}, errUnsupported
}

// Release fails with errors.ErrUnsupported.
func (*Backend) Release(context.Context, string, string) error { return errUnsupported }

// Close does nothing.
func (*Backend) Close() error { return nil }

// Reclaim fails with errors.ErrUnsupported.
func (*Backend) Reclaim(context.Context, time.Duration) (int, error) { return 0, errUnsupported }
