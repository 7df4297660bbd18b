package file

import (
	"encoding/binary"
	"errors"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// watcher reads one inotify instance for a backend. A watch is on a name's
// file while this backend waits for it and other processes take part: a
// write by them (IN_MODIFY) or the close of their descriptor, including by
// the kernel when they die (IN_CLOSE_WRITE), wakes the name's pump.
type watcher struct {
	f  *os.File
	fd int

	mu   sync.Mutex
	byWD map[int32]*nameFile
}

const watchMask = unix.IN_MODIFY | unix.IN_CLOSE_WRITE

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
				nf.poke()
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
