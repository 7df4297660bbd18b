//go:build linux || darwin || freebsd

package lockbench

import (
	"context"
	"os"
	"syscall"
	"time"
)

// flockLocker is the baseline: bare flock(2) on a lock file next to each
// data file, opened and closed around every update as a PHP worker does.
// The data file itself cannot carry the lock: it is replaced by rename.
type flockLocker struct{ dir string }

func (l *flockLocker) lock(_ context.Context, key int) (time.Duration, func() error, error) {
	path := pivotPath(l.dir, "global", 0)
	if key >= 0 {
		path = pivotPath(l.dir, "sharded", key)
	}
	// The open is part of taking the lock, as sema's Acquire includes
	// opening its state file.
	start := time.Now()
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return 0, nil, err
	}
	fd := int(f.Fd())
	for {
		err = syscall.Flock(fd, syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	wait := time.Since(start)
	if err != nil {
		f.Close()
		return 0, nil, err
	}
	return wait, func() error {
		_ = syscall.Flock(fd, syscall.LOCK_UN)
		return f.Close()
	}, nil
}

func (l *flockLocker) close() error { return nil }

// keptFlock is bare flock(2) on a descriptor kept open, as a long-running
// worker process keeps its lock file open.
type keptFlock struct {
	f  *os.File
	fd int
}

func openFlock(path string) (*keptFlock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	return &keptFlock{f: f, fd: int(f.Fd())}, nil
}

func (l *keptFlock) lock(context.Context) (func() error, error) {
	for {
		err := syscall.Flock(l.fd, syscall.LOCK_EX)
		if err == nil {
			return l.unlock, nil
		}
		if err != syscall.EINTR {
			return nil, err
		}
	}
}

func (l *keptFlock) unlock() error { return syscall.Flock(l.fd, syscall.LOCK_UN) }

func (l *keptFlock) close() error { return l.f.Close() }
