//go:build unix

package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sema-dev/sema"
)

// lockDir takes an exclusive, non-blocking flock on dir/LOCK, so that two
// processes never run the same store. The kernel drops it when the process
// dies, even by kill -9.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: open lock file: %w: %w", sema.ErrUnavailable, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("store: data dir %s is in use by another process: %w", dir, sema.ErrUnavailable)
		}
		return nil, fmt.Errorf("store: lock data dir: %w: %w", sema.ErrUnavailable, err)
	}
	return f, nil
}

func unlockDir(f *os.File) {
	if f != nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}
}
