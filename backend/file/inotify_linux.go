package file

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// watcher reads one inotify instance for a backend. A watch is on a name's
// file while this backend waits for it and other processes take part: the
// close of their descriptor, done by the kernel when they die
// (IN_CLOSE_WRITE), wakes the name's pump, which reads the state only if a
// process it waits behind is gone (see aheadAlive). Grants do not come
// this way: they ring a doorbell (doorbell_linux.go).
type watcher struct {
	f  *os.File
	fd int

	mu   sync.Mutex
	byWD map[int32]*nameFile
}

const watchMask = unix.IN_CLOSE_WRITE

func newWatcher() (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	w := &watcher{f: os.NewFile(uintptr(fd), "inotify"), fd: fd, byWD: make(map[int32]*nameFile)}
	go w.loop()
	return w, nil
}

func (w *watcher) loop() {
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return // closed; after any other error waiters fall back to Recheck
		}
		w.mu.Lock()
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(buf[off:]))
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			off += unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(buf[off+12:]))
			if mask&unix.IN_Q_OVERFLOW != 0 {
				for _, nf := range w.byWD {
					nf.poke()
				}
			} else if nf := w.byWD[wd]; nf != nil {
				nf.b.wakes.Add(1)
				nf.closed()
			}
		}
		w.mu.Unlock()
	}
}

func (w *watcher) add(nf *nameFile) (int, error) {
	wd, err := unix.InotifyAddWatch(w.fd, nf.path, watchMask)
	if err != nil {
		return -1, err
	}
	w.mu.Lock()
	w.byWD[int32(wd)] = nf
	w.mu.Unlock()
	return wd, nil
}

func (w *watcher) remove(wd int) {
	w.mu.Lock()
	delete(w.byWD, int32(wd))
	w.mu.Unlock()
	unix.InotifyRmWatch(w.fd, uint32(wd))
}

func (w *watcher) close() error { return w.f.Close() }

// addWatch watches nf's file, starting the backend's inotify reader on
// first use.
func (b *Backend) addWatch(nf *nameFile) (int, error) {
	b.mu.Lock()
	if b.watch == nil && !b.noWatch && !b.closed {
		w, err := newWatcher()
		if err != nil {
			b.noWatch = true
			b.mu.Unlock()
			return -1, err
		}
		b.watch = w
	}
	w := b.watch
	b.mu.Unlock()
	if w == nil {
		return -1, errors.New("inotify unavailable")
	}
	return w.add(nf)
}

func (b *Backend) removeWatch(wd int) {
	b.mu.Lock()
	w := b.watch
	b.mu.Unlock()
	if w != nil {
		w.remove(wd)
	}
}

// hasForeign reports whether the state has entries of other open files:
// only they can die without telling us; our own come with a direct hand-off.
func (nf *nameFile) hasForeign(st *state) bool {
	for i := range st.Holders {
		if !nf.ours(st.Holders[i].Slot, st.Holders[i].Nonce) {
			return true
		}
	}
	for i := range st.Waiters {
		if !nf.ours(st.Waiters[i].Slot, st.Waiters[i].Nonce) {
			return true
		}
	}
	return false
}

// watchIfNeeded puts an inotify watch on the file once we wait and other
// processes take part: the kernel closes a process's files when it dies,
// which raises IN_CLOSE_WRITE. It runs under the state lock, so no death
// can slip in between the check and the watch. The watch stays until the
// file is closed (detachIfIdle): a name waited for once is likely waited
// for again, and a close while nobody here waits costs one look at the
// liveness of a few processes.
func (nf *nameFile) watchIfNeeded(st *state) {
	if nf.wd >= 0 || nf.noWatch || len(nf.waiting) == 0 || !nf.hasForeign(st) {
		return
	}
	wd, err := nf.b.addWatch(nf)
	if err != nil {
		nf.noWatch = true
		nf.b.log.Warn("file: no inotify watch; waiters poll", "name", nf.name, "every", nf.b.cfg.Poll, "err", err)
		return
	}
	nf.wd = wd
}

// aheadAlive reports whether every process this backend's waiters wait
// behind is alive, as of the state last read: the holders, and the entry
// just ahead of our first waiter in the queue. A dead one's entries must go
// at once; the death of any other process changes nothing for us (the one
// queued behind the dead one looks, as we do here). Without a known state,
// or when our waiters are not in it, it reports false: read the state; with
// no waiter left, true.
//
// On a name of limit 1 a waiter behind another watches that one only. The
// holders it read may have released since: the entry ahead has been
// granted after them, or is still queued behind the holder, whose death is
// then the head's to see. Watching them too would make every process that
// exits after its release (sema run, a loop of jobs) wake each waiter
// into a read of the state. An entry ahead that leaves the queue while its
// process lives on rings the waiter behind it (dropWaiters).
func (nf *nameFile) aheadAlive() bool {
	if nf.lockLocal(context.Background()) != nil {
		return false
	}
	defer nf.unlockLocal()
	st := nf.cache
	switch {
	case len(nf.waiting) == 0:
		return true // granted meanwhile: nothing to look for
	case st == nil:
		return false
	}
	var seen []uint32
	check := func(slot uint32) bool {
		if int64(slot) == nf.slot || slices.Contains(seen, slot) {
			return true
		}
		seen = append(seen, slot)
		alive, err := slotAlive(nf.rc, slot)
		return alive && err == nil
	}
	first := slices.IndexFunc(st.Waiters, func(w waiterRec) bool {
		return nf.waiting[w.ID] != nil && nf.ours(w.Slot, w.Nonce)
	})
	switch {
	case first < 0:
		return false
	case first > 0 && st.Limit == 1:
		return check(st.Waiters[first-1].Slot)
	}
	for i := range st.Holders {
		if !check(st.Holders[i].Slot) {
			return false
		}
	}
	return first == 0 || check(st.Waiters[first-1].Slot)
}
