//go:build !unix

package store

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sema-dev/sema"
)

// lockDir creates dir/LOCK exclusively. Without flock, a crashed process
// leaves the file behind and the operator must delete it.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: data dir %s is in use (or %s was left by a crash): %w: %w",
			dir, path, sema.ErrUnavailable, err)
	}
	return f, nil
}

func unlockDir(f *os.File) {
	if f != nil {
		name := f.Name()
		_ = f.Close()
		_ = os.Remove(name)
	}
}
