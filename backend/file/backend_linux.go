package file

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/forced"
	"golang.org/x/sys/unix"
)

// Backend keeps semaphores in state files under one directory, shared by
// every process of the host that opens the same directory. It is safe for
// concurrent use. Create it with [Open].
type Backend struct {
	dir  string
	acc  access
	cfg  Config
	log  *slog.Logger
	boot [16]byte
	done chan struct{} // closed by Close

	sweepMu  sync.Mutex     // held by a sweep until its files are closed; before mu
	slotHint atomic.Int64   // the liveness slot last taken (see takeSlot)
	ring     ringer         // rings other processes' doorbells
	notices  forced.Notices // told of this backend's leases force-released
	// holderBells counts the doorbells bound for names only held (see
	// bindForHolder)
	holderBells atomic.Int32
	wakes       atomic.Int64 // wake-ups by another process: rings and close events received, for tests
	looks       atomic.Int64 // reads of the state after a close event (see aheadAlive), for tests

	mu      sync.Mutex
	names   map[string]*nameFile
	closed  bool
	janitor *time.Ticker
	watch   *watcher // nil until first needed
	noWatch bool     // inotify is unavailable: waiters poll
}

// Interface guards.
var (
	_ sema.Backend       = (*Backend)(nil)
	_ sema.Blocker       = (*Backend)(nil)
	_ sema.Inspector     = (*Backend)(nil)
	_ sema.ForceReleaser = (*Backend)(nil)
	_ sema.ForceNotifier = (*Backend)(nil)
	_ sema.Declarer      = (*Backend)(nil)
)

// Open returns a backend over the directory dir, creating it (mode 0700) if
// missing. A directory with the setgid bit is host-wide: its state files
// are shared by the users of its group (see the package doc). A nil cfg
// means the defaults. Network file systems (NFS, SMB)
// are refused: their locks and change events do not behave as on a local
// disk.
func Open(dir string, cfg *Config) (*Backend, error) {
	if dir == "" {
		return nil, fmt.Errorf("file: %w: empty directory", sema.ErrInvalidArgument)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("file: %w: directory %q: %w", sema.ErrInvalidArgument, dir, err)
	}
	fi, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		err = os.MkdirAll(abs, 0o700)
	} else if err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("file: %w: %s is not a directory", sema.ErrInvalidArgument, abs)
	}
	if err != nil {
		return nil, fmt.Errorf("file: directory %s: %w: %w", abs, sema.ErrUnavailable, err)
	}
	if err := checkLocalFS(abs); err != nil {
		return nil, err
	}
	if fi, err = os.Stat(abs); err != nil {
		return nil, fmt.Errorf("file: directory %s: %w: %w", abs, sema.ErrUnavailable, err)
	}
	c := cfg.withDefaults()
	return &Backend{
		dir: abs, acc: dirAccess(fi), cfg: c, log: c.Logger, boot: bootID(), done: make(chan struct{}),
		names: make(map[string]*nameFile),
	}, nil
}

// Dir returns the backend's directory, as an absolute path.
func (b *Backend) Dir() string { return b.dir }

// Guarantees declares what the file backend promises.
func (b *Backend) Guarantees() sema.Guarantees {
	return sema.Guarantees{
		Scope: sema.ScopeHost, FIFO: true, Linearizable: true, DurableFencing: true,
		Wakeup: "in-process hand-off; across processes, a grant rings the granted process's doorbell (a unix datagram socket), " +
			"and a process's death (IN_CLOSE_WRITE on the name's file) wakes the one queued behind it; a timer at the earliest expiry",
		Notes: "one host, no daemon; expiry by the host's wall clock; a dead holder frees its permits at once " +
			"(kernel OFD locks), a hung one at its TTL",
	}
}

// Close fails current waiters with sema.ErrClosed and closes every file,
// which ends this process's leases: other processes see them as dead.
func (b *Backend) Close() error {
	b.sweepMu.Lock() // the files a sweep took out of names are closed too
	defer b.sweepMu.Unlock()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.done)
	if b.janitor != nil {
		b.janitor.Stop()
	}
	names := b.names
	b.names = nil
	w := b.watch
	b.mu.Unlock()
	var errs []error
	for _, nf := range names {
		if nf.bell != nil { // before the slot goes with the file
			errs = append(errs, nf.bell.f.Close())
		}
		errs = append(errs, nf.f.Close())
	}
	if w != nil {
		errs = append(errs, w.close())
	}
	errs = append(errs, b.ring.close())
	return errors.Join(errs...)
}

func (b *Backend) isClosed() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// errNoFile: the name has no state file, so nobody ever held it.
var errNoFile = errors.New("no state file")

// ref returns the open state file of name, opening (and with create,
// creating) it. Every ref is paired with unref.
func (b *Backend) ref(name string, create bool) (*nameFile, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, sema.ErrClosed
	}
	if nf := b.names[name]; nf != nil {
		nf.refs++
		b.mu.Unlock()
		return nf, nil
	}
	b.mu.Unlock()
	f, err := b.openFile(name, create)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		f.Close()
		return nil, sema.ErrClosed
	}
	if nf := b.names[name]; nf != nil { // opened meanwhile by another goroutine
		f.Close()
		nf.refs++
		return nf, nil
	}
	nf, err := newNameFile(b, name, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	nf.refs = 1
	b.names[name] = nf
	if b.janitor == nil {
		b.janitor = time.NewTicker(min(b.cfg.IdleClose/2, janitorEvery))
		go b.sweep(b.janitor)
	}
	return nf, nil
}

func (b *Backend) unref(nf *nameFile) {
	b.mu.Lock()
	nf.refs--
	if nf.refs == 0 {
		nf.idleSince = time.Now()
	}
	closeIt := nf.refs == 0 && nf.gone
	b.mu.Unlock()
	if closeIt {
		nf.f.Close()
	}
}

// forget drops nf, whose file was reclaimed, from the open names: the next
// ref opens the name's file again, and the last unref closes nf's.
func (b *Backend) forget(nf *nameFile) {
	b.mu.Lock()
	if b.names[nf.name] == nf {
		delete(b.names, nf.name)
	}
	b.mu.Unlock()
}

// openFile opens the state file of name. A new file is created whole: its
// first record is written to a temporary file that is then linked into
// place, so a state file is never seen empty: an empty one is damaged.
// Its token counter starts at the directory's token floor, under a shared
// lock of the directory (see Reclaim).
func (b *Backend) openFile(name string, create bool) (*os.File, error) {
	path := statePath(b.dir, name)
	for {
		f, err := openState(path, os.O_RDWR)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, b.accessErr("open", name, err)
		}
		if !create {
			return nil, errNoFile
		}
		// (A new file is idle until its first step: Reclaim may remove it
		// before it is opened. Then it is created again.)
		if err := b.createFile(path, name); err != nil {
			return nil, b.accessErr("create", name, err)
		}
	}
}

func (b *Backend) createFile(path, name string) error {
	d, err := b.lockDir(unix.LOCK_SH)
	if err != nil {
		return err
	}
	defer d.Close()
	floor, err := b.readFloor(time.Now())
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(b.dir, ".new-*") // mode 0600
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	rec, err := appendRecord(nil, 0, &state{Name: name, Boot: b.boot, Token: floor})
	if err == nil && b.acc.shared {
		err = tmp.Chmod(b.acc.fileMode()) // the group is the directory's (setgid)
	}
	if err == nil {
		_, err = tmp.Write(rec)
	}
	if err == nil && b.cfg.Sync {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// janitorEvery is the longest period of a backend's janitor (sweep).
const janitorEvery = time.Second

// sweep is the backend's janitor. It binds the doorbells of names with
// leases held (bindForHolder), and closes files idle for IdleClose: no
// lease of this backend is live on them and nobody here waits. Closing
// drops this process's liveness lock. The files are closed after b.mu is
// released: a sweep may close hundreds of them, and every step of this
// backend takes b.mu (in ref). A step that opens the name meanwhile gets a
// new descriptor of its own.
func (b *Backend) sweep(t *time.Ticker) {
	var idle []*os.File
	var open []*nameFile
	for {
		select {
		case <-b.done:
			return
		case now := <-t.C:
			b.mu.Lock()
			for _, nf := range b.names {
				open = append(open, nf)
			}
			b.mu.Unlock()
			for i, nf := range open {
				nf.bindForHolder()
				open[i] = nil
			}
			open = open[:0]
			b.sweepMu.Lock()
			b.mu.Lock()
			for name, nf := range b.names {
				if nf.refs == 0 && now.Sub(nf.idleSince) >= b.cfg.IdleClose && nf.detachIfIdle(now) {
					delete(b.names, name)
					idle = append(idle, nf.f)
				}
			}
			b.mu.Unlock()
			for i, f := range idle {
				f.Close()
				idle[i] = nil
			}
			idle = idle[:0]
			b.sweepMu.Unlock()
		}
	}
}
