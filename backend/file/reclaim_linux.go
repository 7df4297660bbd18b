package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sema-dev/sema"
	"golang.org/x/sys/unix"
)

// Reclaiming idle names. A name's state file may be removed once nobody
// uses it, as long as its fencing tokens never go back: the directory
// keeps a token floor, at least every token of every removed file, and a
// new state file's counter starts from it. The floor is a file of its own
// (floorFile), replaced whole and synced before any state file it covers
// is removed. Creating a state file (reading the floor, linking the file
// into place) holds a shared flock(2) on the directory, and Reclaim an
// exclusive one: a file created from a floor that a removal raises
// meanwhile cannot appear.
//
// Reclaim removes a file only under its state lock, when no process holds
// a liveness slot on it: a process that holds or waits for the name, or
// used it within its IdleClose, holds one. A process that opened the file
// before the removal and takes its first step after it finds the file
// unlinked (under the state lock, before anything is read) and starts the
// step again on a new file.

// floorFile holds the directory's token floor, in decimal.
const floorFile = ".token-floor"

// reclaimBatch bounds the state files one Reclaim holds locked at once.
const reclaimBatch = 1024

// errGone: the name's file was removed by Reclaim after this backend
// opened it; the step starts again on a new file.
var errGone = errors.New("state file reclaimed")

// lockDir opens the directory and takes flock(how) on it.
func (b *Backend) lockDir(how int) (*os.File, error) {
	d, err := os.Open(b.dir)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(d.Fd()), how)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("flock %s: %w", b.dir, err)
	}
	return d, nil
}

// readFloor returns the directory's token floor: 0 if it has none, and
// if its file is damaged the wall clock in microseconds (see tokenFloor),
// above any token issued before.
func (b *Backend) readFloor(now time.Time) (uint64, error) {
	data, err := os.ReadFile(filepath.Join(b.dir, floorFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSuffix(string(data), "\n"), 10, 64)
	if err != nil {
		b.log.Warn("file: damaged token floor; restarting it from the clock", "dir", b.dir, "err", err)
		return tokenFloor(now), nil
	}
	return v, nil
}

// writeFloor replaces the floor file with v, durably: written aside,
// synced, renamed into place, and the directory synced. Called with the
// directory locked exclusively.
func (b *Backend) writeFloor(d *os.File, v uint64) error {
	tmp, err := os.CreateTemp(b.dir, ".floor-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(strconv.FormatUint(v, 10) + "\n")
	if err == nil && b.acc.shared {
		err = tmp.Chmod(b.acc.fileMode())
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(b.dir, floorFile))
	}
	if err == nil {
		err = d.Sync()
	}
	return err
}

// unlinked reports whether nf's file was removed from the directory.
// Called with the state lock held.
func (nf *nameFile) unlinked() (bool, error) {
	var st unix.Stat_t
	var err error
	if cerr := nf.rc.Control(func(fd uintptr) { err = unix.Fstat(int(fd), &st) }); cerr != nil {
		return false, cerr
	}
	if err != nil {
		return false, fmt.Errorf("fstat: %w", err)
	}
	return st.Nlink == 0, nil
}

// Reclaim removes the state files of names that nobody has held, waited
// for or had open for at least idle (by the file's last change), and
// returns how many it removed. Fencing tokens stay strictly increasing:
// a reclaimed name used again gets tokens above every token it ever had.
// Files in use, locked by a step, damaged, or still remembering a
// force-release are left alone. Run it from time to time (sema gc) where
// many names are used once, such as date-stamped job names.
func (b *Backend) Reclaim(ctx context.Context, idle time.Duration) (int, error) {
	if idle < 0 {
		return 0, fmt.Errorf("file: reclaim: %w: negative idle time %v", sema.ErrInvalidArgument, idle)
	}
	if b.isClosed() {
		return 0, sema.ErrClosed
	}
	removed := 0
	for {
		n, more, err := b.reclaimBatch(ctx, idle)
		removed += n
		if err != nil || !more {
			return removed, err
		}
	}
}

// reclaimBatch removes up to reclaimBatch idle state files, and reports
// whether more may remain.
func (b *Backend) reclaimBatch(ctx context.Context, idle time.Duration) (removed int, more bool, err error) {
	d, err := b.lockDir(unix.LOCK_EX)
	if err != nil {
		return 0, false, fmt.Errorf("file: reclaim in %s: %w: %w", b.dir, sema.ErrUnavailable, err)
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return 0, false, fmt.Errorf("file: reclaim in %s: %w: %w", b.dir, sema.ErrUnavailable, err)
	}
	now := time.Now()
	floor, err := b.readFloor(now)
	if err != nil {
		return 0, false, fmt.Errorf("file: reclaim in %s: %w: %w", b.dir, sema.ErrUnavailable, err)
	}
	var victims []*os.File
	defer func() {
		for _, f := range victims {
			f.Close()
		}
	}()
	top := floor
	for _, e := range entries {
		if ctx.Err() != nil {
			return 0, false, context.Cause(ctx)
		}
		if len(victims) == reclaimBatch {
			more = true
			break
		}
		if !isStateFile(e.Name()) {
			continue
		}
		if fi, err := e.Info(); err != nil || now.Sub(fi.ModTime()) < idle {
			continue
		}
		f, token, ok := b.lockIdle(filepath.Join(b.dir, e.Name()), now)
		if ok {
			victims = append(victims, f)
			top = max(top, token)
		}
	}
	if len(victims) == 0 {
		return 0, false, nil
	}
	if top != floor {
		if err := b.writeFloor(d, top); err != nil {
			return 0, false, fmt.Errorf("file: reclaim in %s: write token floor: %w: %w", b.dir, sema.ErrUnavailable, err)
		}
	}
	for _, f := range victims {
		if err := os.Remove(f.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, false, fmt.Errorf("file: reclaim in %s: %w: %w", b.dir, sema.ErrUnavailable, err)
		}
		removed++
	}
	return removed, more, nil
}

// lockIdle opens the state file at path and, if it can be removed, returns
// it with its state lock held and its last token. It can be removed if
// the lock is free, no process holds a liveness slot on it, its record is
// sound and remembers no force-release still in force.
func (b *Backend) lockIdle(path string, now time.Time) (*os.File, uint64, bool) {
	f, err := openState(path, os.O_RDONLY)
	if err != nil {
		return nil, 0, false
	}
	token, ok := func() (uint64, bool) {
		rc, err := f.SyscallConn()
		if err != nil {
			return 0, false
		}
		if got, err := newStateLock(rc, unix.LOCK_EX).try(); !got || err != nil {
			return 0, false
		}
		if live, err := liveSlots(rc); err != nil || len(live) > 0 {
			return 0, false
		}
		snap, _, err := readState(newPreader(rc, path), "", nil, header{}, nil, nil)
		if err != nil || snap.st == nil {
			return 0, false
		}
		for _, r := range snap.st.Revoked {
			if now.UnixNano() < r.Until {
				return 0, false
			}
		}
		return snap.st.Token, true
	}()
	if !ok {
		f.Close()
		return nil, 0, false
	}
	return f, token, true
}
