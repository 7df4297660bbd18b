package file

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"

	"golang.org/x/sys/unix"
)

// Two kinds of kernel locks on a state file, both owned by one open file
// description (not by a process, as classic fcntl locks are), so that
// goroutines and several Backends of one process do not share them and
// closing another descriptor of the file does not drop them. Linux keeps
// flock(2) and fcntl locks apart: they never conflict with each other.
//
//   - The state lock, flock(2) on the whole file: exclusive for every atomic
//     step on the state, shared for Describe and List.
//   - Liveness slots, open file description (OFD) byte-range locks at
//     slotBase+s, far beyond the data (locks need no data under them): held
//     for as long as a Backend has the file open. Entries in the state carry
//     the slot of the open file that vouches for them. The kernel drops the
//     lock when the process dies, however it dies: an unlocked slot means a
//     dead holder.
const slotBase = 1 << 40

// stateLock is the flock(2) state lock of one open file; how is
// unix.LOCK_EX or unix.LOCK_SH. It is used by one goroutine at a time.
type stateLock struct {
	rc   syscall.RawConn
	how  int
	op   int              // argument of the flock call in progress
	err  error            // its result
	call func(fd uintptr) // l.run, bound once: no allocation per call
}

func newStateLock(rc syscall.RawConn, how int) *stateLock {
	l := &stateLock{rc: rc, how: how}
	l.call = l.run
	return l
}

func (l *stateLock) run(fd uintptr) {
	for {
		if l.err = unix.Flock(int(fd), l.op); !errors.Is(l.err, unix.EINTR) {
			return
		}
	}
}

func (l *stateLock) flock(op int) error {
	l.op = op
	if err := l.rc.Control(l.call); err != nil {
		return err
	}
	return l.err
}

// try takes the lock without waiting; false if another open file holds it.
func (l *stateLock) try() (bool, error) {
	switch err := l.flock(l.how | unix.LOCK_NB); {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		return false, nil
	default:
		return false, fmt.Errorf("flock: %w", err)
	}
}

// wait blocks in the kernel until the lock is free.
func (l *stateLock) wait() error {
	if err := l.flock(l.how); err != nil {
		return fmt.Errorf("flock: %w", err)
	}
	return nil
}

func (l *stateLock) unlock() error { return l.flock(unix.LOCK_UN) }

// fcntl runs one OFD lock command on [start, start+length), retrying EINTR.
func fcntl(rc syscall.RawConn, cmd int, typ int16, start, length int64) (unix.Flock_t, error) {
	lk := unix.Flock_t{Type: typ, Whence: io.SeekStart, Start: start, Len: length}
	var err error
	cerr := rc.Control(func(fd uintptr) {
		for {
			if err = unix.FcntlFlock(fd, cmd, &lk); !errors.Is(err, unix.EINTR) {
				return
			}
		}
	})
	if cerr != nil {
		return lk, cerr
	}
	return lk, err
}

// tryLock takes a lock without waiting; false if another open file holds a
// conflicting one.
func tryLock(rc syscall.RawConn, typ int16, off int64) (bool, error) {
	_, err := fcntl(rc, unix.F_OFD_SETLK, typ, off, 1)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EACCES):
		return false, nil
	}
	return false, fmt.Errorf("fcntl(F_OFD_SETLK): %w", err)
}

// lockedAt reports whether another open file holds a lock in [start,
// start+length), and where one of them starts.
func lockedAt(rc syscall.RawConn, start, length int64) (bool, int64, error) {
	lk, err := fcntl(rc, unix.F_OFD_GETLK, unix.F_WRLCK, start, length)
	if err != nil {
		return false, 0, fmt.Errorf("fcntl(F_OFD_GETLK): %w", err)
	}
	return lk.Type != unix.F_UNLCK, lk.Start, nil
}

// slotAlive reports whether another open file holds liveness slot s.
func slotAlive(rc syscall.RawConn, s uint32) (bool, error) {
	held, _, err := lockedAt(rc, slotBase+int64(s), 1)
	return held, err
}

// liveSlots lists the slots held by other open files. F_OFD_GETLK reports
// one conflicting lock per call, so the range is split around each one.
func liveSlots(rc syscall.RawConn) ([]uint32, error) {
	var out []uint32
	stack := [][2]int64{{0, maxSlots}}
	for len(stack) > 0 {
		r := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if r[0] >= r[1] {
			continue
		}
		held, at, err := lockedAt(rc, slotBase+r[0], r[1]-r[0])
		if err != nil {
			return nil, err
		}
		if !held {
			continue
		}
		s := max(at-slotBase, r[0])
		out = append(out, uint32(s))
		stack = append(stack, [2]int64{r[0], s}, [2]int64{s + 1, r[1]})
	}
	return out, nil
}

// lockCtx takes l, waiting until ctx is done. The wait blocks in the
// kernel (woken on unlock) and cannot be interrupted, so on ctx's end it is
// left to finish on its own goroutine, which then calls abandon(acquired):
// the caller must treat the lock, and anything it guards, as passed on to
// abandon. abandoned reports that case.
func lockCtx(ctx context.Context, l *stateLock, abandon func(acquired bool)) (abandoned bool, err error) {
	ok, err := l.try()
	if err != nil || ok {
		return false, err
	}
	if ctx.Done() == nil {
		return false, l.wait()
	}
	ch := make(chan error, 1)
	go func() { ch <- l.wait() }()
	select {
	case err := <-ch:
		return false, err
	case <-ctx.Done():
		go func() { abandon(<-ch == nil) }()
		return true, context.Cause(ctx)
	}
}
