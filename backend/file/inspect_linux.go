package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sema-dev/sema"
	"golang.org/x/sys/unix"
)

// Describe returns the holders and waiters of name, read from its state
// file under a shared lock. It changes nothing: expired leases and entries
// of dead processes are left out of the answer, not removed.
func (b *Backend) Describe(ctx context.Context, name string) (sema.Status, error) {
	if err := sema.ValidateName(name); err != nil {
		return sema.Status{}, err
	}
	if b.isClosed() {
		return sema.Status{}, sema.ErrClosed
	}
	st, err := b.view(ctx, statePath(b.dir, name), name)
	if errors.Is(err, fs.ErrNotExist) {
		return sema.Status{Name: name, Holders: []sema.Holder{}, Waiters: []sema.WaiterInfo{}}, nil
	}
	if errors.Is(err, fs.ErrPermission) {
		return sema.Status{}, b.accessErr("read", name, err)
	}
	if err != nil {
		return sema.Status{}, err
	}
	return st.status(), nil
}

// List returns every name starting with prefix that has holders or
// waiters, sorted by name. Files it cannot read are logged and skipped.
func (b *Backend) List(ctx context.Context, prefix string) ([]sema.Status, error) {
	if b.isClosed() {
		return nil, sema.ErrClosed
	}
	entries, err := os.ReadDir(b.dir)
	if err != nil {
		return nil, fmt.Errorf("file: list %s: %w: %w", b.dir, sema.ErrUnavailable, err)
	}
	out := []sema.Status{}
	for _, e := range entries {
		if !isStateFile(e.Name()) {
			continue
		}
		st, err := b.view(ctx, filepath.Join(b.dir, e.Name()), "")
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			if !errors.Is(err, fs.ErrNotExist) {
				b.log.Warn("file: list: skipping unreadable state file", "file", e.Name(), "err", err)
			}
			continue
		}
		if !st.idle() && strings.HasPrefix(st.Name, prefix) {
			out = append(out, st.status())
		}
	}
	slices.SortFunc(out, func(a, b sema.Status) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// view reads a state file without changing it and filters out what has
// expired or died. name is "" when not known (List).
func (b *Backend) view(ctx context.Context, path, name string) (*state, error) {
	f, err := openState(path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	abandoned, err := lockCtx(ctx, newStateLock(rc, unix.LOCK_SH), func(bool) { f.Close() })
	if err != nil {
		if !abandoned {
			f.Close()
		}
		return nil, fmt.Errorf("file: read %s: %w", path, err)
	}
	defer f.Close() // drops the lock
	snap, _, err := readState(newPreader(rc, path), name, nil, header{}, nil, nil)
	if err != nil {
		return nil, err
	}
	if snap.st == nil {
		return nil, fmt.Errorf("file: %s: %w: state file is damaged; the next acquire of the name repairs it", path, sema.ErrUnavailable)
	}
	st := snap.st
	st.reapExpired(time.Now().UnixNano())
	alive := make(map[uint32]bool)
	live := func(slot uint32) bool {
		a, ok := alive[slot]
		if !ok {
			var err error
			a, err = slotAlive(rc, slot)
			a = a || err != nil // unsure: show it
			alive[slot] = a
		}
		return a
	}
	st.Holders = slices.DeleteFunc(st.Holders, func(h holderRec) bool { return !live(h.Slot) })
	st.Waiters = slices.DeleteFunc(st.Waiters, func(w waiterRec) bool { return !live(w.Slot) })
	return st, nil
}

// ForceRelease ends the lease id of name, or all of its leases if id is "".
// The holders' next renewal fails with sema.ErrForceReleased. Unless
// opts.Now, their permits stay taken until the leases expire or their
// holders release them (or die: the kernel frees a dead holder's leases).
// The holders are told at once (see tellForced).
// Phantom holders of a repaired file are lifted at once.
func (b *Backend) ForceRelease(ctx context.Context, name, id string, opts sema.ForceOptions) ([]sema.Holder, error) {
	if err := sema.ValidateName(name); err != nil {
		return nil, err
	}
	notHeld := fmt.Errorf("file: force-release %q: %w", name, sema.ErrNotHeld)
	nf, st, now, err := b.beginStep(ctx, name, false)
	if errors.Is(err, errNoFile) {
		return nil, notHeld
	} else if err != nil {
		return nil, err
	}
	defer b.unref(nf)
	defer nf.end()
	var out []sema.Holder
	var told []holderRec
	st.Holders = slices.DeleteFunc(st.Holders, func(h holderRec) bool {
		if id != "" && (h.Phantom || h.ID != id) {
			return false
		}
		info := h.info()
		if h.Phantom {
			out = append(out, info)
			return true
		}
		info.ForceReleased = true
		out = append(out, info)
		told = append(told, h)
		if !st.revoked(h.ID) {
			st.revoke(h.ID, max(h.Expires, now.UnixNano())+int64(revokedFor))
			nf.dirty = true
		}
		if !opts.Now {
			return false
		}
		delete(nf.leases, h.ID)
		return true
	})
	if len(out) > 0 {
		nf.dirty = true
	}
	if err := nf.commit(st, now); err != nil {
		return nil, err
	}
	nf.tellForced(told, opts.By)
	if len(out) == 0 {
		return nil, notHeld
	}
	return out, nil
}

// NotifyForced makes the backend call f for each of its leases
// force-released, by this process or another, so that its holder learns at
// once (sema.ForceNotifier).
func (b *Backend) NotifyForced(f func(sema.ForceNotice)) (stop func()) { return b.notices.Add(f) }
