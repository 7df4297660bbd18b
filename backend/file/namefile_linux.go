package file

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/sema-dev/sema"
	"golang.org/x/sys/unix"
)

// nameFile is this backend's open state file of one name. Goroutines of the
// backend share it: lk orders them (they share one open file, whose OFD
// locks do not exclude each other), the state lock orders processes.
type nameFile struct {
	b    *Backend
	name string
	path string
	f    *os.File
	rc   syscall.RawConn
	lk   chan struct{} // local mutex, taken with a context
	kick chan struct{} // wakes the pump: read the state
	died chan struct{} // wakes the pump: a process closed the file, maybe dying
	lock *stateLock    // the state lock; used under lk
	rd   *preader      // reads the state; used under lk
	strs *interner     // strings of the record last read, once another process writes; used under lk
	drop func(bool)    // nf.abandon, bound once

	// Guarded by lk.
	slot       int64  // liveness slot held by f; -1 until taken
	nonce      uint64 // random, tells our entries from a dead previous owner's of the slot
	gen        uint64 // generation of the record last read or written
	cache      *state // the state as of gen, when we know it
	cacheHdr   header
	changed    bool               // the last read found the cache outdated: another process writes too
	dirty      bool               // the state was changed in this step
	wrote      bool               // and written
	buf        []byte             // encoding buffer
	rbuf       []byte             // reading buffer
	leases     map[string]lease   // leases of this backend, vouched for by slot
	waiting    map[string]*waiter // Acquire calls of this backend that wait
	pumping    bool               // the pump goroutine runs
	inPump     bool               // the pump is in its step
	orphans    bool               // the file may hold entries of ours nobody uses
	nextWake   time.Time          // when the pump re-reads the state
	wd         int                // inotify watch descriptor; -1 if none
	noWatch    bool               // no inotify for this file: poll
	bell       *doorbell          // this process's doorbell on the name, once it waited or held
	holderBell bool               // bell was bound for holders (counted in b.holderBells)
	noBell     error              // why the doorbell could not be bound (then: poll)
	bellPrefix string             // see bellBase
	rang       bool               // this step rang another process with a grant (see end)
	ringAll    bool               // ring every live slot once the state lock is free: a repair, or a phantom gone
	phantoms   int                // phantom holders in the state as read by this step
	lives      []slotLife         // liveness found by this step (see alive)
	reapAll    bool               // drop every dead entry at the next step: a death was seen

	// Guarded by b.mu.
	refs      int
	idleSince time.Time
	gone      bool // the file was reclaimed before this backend's first step on it; set under lk and b.mu
}

// lease is what a backend remembers of its own leases, to re-register them
// if the state file is found damaged.
type lease struct {
	rec   holderRec
	limit int64
}

func newNameFile(b *Backend, name string, f *os.File) (*nameFile, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	nf := &nameFile{
		b: b, name: name, path: f.Name(), f: f, rc: rc,
		lk: make(chan struct{}, 1), kick: make(chan struct{}, 1), died: make(chan struct{}, 1), lock: newStateLock(rc, unix.LOCK_EX), rd: newPreader(rc, f.Name()),
		slot: -1, wd: -1,
		leases: make(map[string]lease), waiting: make(map[string]*waiter),
	}
	nf.drop = nf.abandon
	return nf, nil
}

// lockLocal takes lk, or fails when ctx is done.
func (nf *nameFile) lockLocal(ctx context.Context) error {
	select {
	case nf.lk <- struct{}{}:
		return nil
	default:
	}
	select {
	case nf.lk <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (nf *nameFile) unlockLocal() { <-nf.lk }

// begin starts an atomic step: lk, then the state lock.
func (nf *nameFile) begin(ctx context.Context) error {
	if err := nf.lockLocal(ctx); err != nil {
		return err
	}
	if nf.b.isClosed() {
		nf.unlockLocal()
		return sema.ErrClosed
	}
	abandoned, err := lockCtx(ctx, nf.lock, nf.drop)
	if err != nil {
		if !abandoned {
			nf.unlockLocal()
		}
		return nf.ioErr("lock", err)
	}
	nf.dirty, nf.wrote = false, false
	nf.lives = nf.lives[:0]
	return nil
}

// end finishes a step begun by begin. After a step that rang another
// process with a grant, it yields the CPU: a unix socket's wake-up tells
// the scheduler that the sender is about to sleep, so the rung process
// tends to be queued on this CPU, where it would wait while this process
// goes on; the grant is what everyone waits for (sema bench contend
// measures the hand-off).
func (nf *nameFile) end() {
	if nf.dirty && !nf.wrote {
		nf.cache = nil // changed in memory only: forget it
		nf.ringAll = false
	}
	nf.lock.unlock()
	nf.ringAllPending()
	rang := nf.rang
	nf.rang = false
	nf.unlockLocal()
	if rang {
		unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
}

// abandon ends a wait for the state lock that begin gave up on: lk stayed
// held until the kernel answered.
func (nf *nameFile) abandon(acquired bool) {
	if acquired {
		nf.lock.unlock()
	}
	nf.unlockLocal()
}

// ioErr wraps a failure to use the file.
func (nf *nameFile) ioErr(op string, err error) error {
	if nf.b.isClosed() {
		return fmt.Errorf("file: %s %q: %w", op, nf.name, sema.ErrClosed)
	}
	if ctxErr(err) {
		return err
	}
	return fmt.Errorf("file: %s %q: %w: %w", op, nf.name, sema.ErrUnavailable, err)
}

func ctxErr(err error) bool {
	return err == context.Canceled || err == context.DeadlineExceeded
}

// takeSlot finds a free liveness slot and locks it. Called with the state
// lock held, so the entries of a dead previous owner of the slot are purged
// (by nonce) before anyone could mistake them for ours.
//
// The search starts at the slot this backend last took on any name: the
// backends of a host tend to keep one slot each on every file, so a file
// (re)opened while others have it open costs one probe, not one per open
// file of the name.
func (nf *nameFile) takeSlot() error {
	start := nf.b.slotHint.Load() % maxSlots
	for i := int64(0); i < maxSlots; i++ {
		s := (start + i) % maxSlots
		ok, err := tryLock(nf.rc, unix.F_WRLCK, slotBase+s)
		if err != nil {
			return nf.ioErr("take liveness slot", err)
		}
		if ok {
			nf.b.slotHint.Store(s)
			var n [8]byte
			rand.Read(n[:])
			nf.slot, nf.nonce = s, binary.LittleEndian.Uint64(n[:])|1
			return nil
		}
	}
	return fmt.Errorf("file: %q: %w: all %d liveness slots are taken", nf.name, sema.ErrUnavailable, maxSlots)
}

// ours reports whether an entry is vouched for by this open file.
func (nf *nameFile) ours(slot uint32, nonce uint64) bool {
	return int64(slot) == nf.slot && nonce == nf.nonce
}

// write stores st as the next generation.
func (nf *nameFile) write(st *state) error {
	buf, err := appendRecord(nf.buf[:0], nf.gen+1, st)
	nf.buf = buf
	if err != nil {
		return fmt.Errorf("file: write %q: %w: %w", nf.name, sema.ErrUnavailable, err)
	}
	if _, err := nf.f.WriteAt(buf, 0); err != nil {
		return nf.ioErr("write", err)
	}
	if nf.b.cfg.Sync {
		if err := nf.f.Sync(); err != nil {
			return nf.ioErr("sync", err)
		}
	}
	nf.gen++
	nf.cacheHdr, _ = parseHeader(buf)
	nf.cache, nf.wrote = st, true
	if n := st.phantomCount(); n < nf.phantoms {
		nf.ringAll = true // a name blocked by phantoms may move on: everyone looks again
	}
	nf.phantoms = st.phantomCount()
	return nil
}

// detachIfIdle reports whether this backend neither holds a live lease on
// the file nor waits for it; if so it drops the file's inotify watch, and
// the caller removes nf from b.names and closes nf.f once b.mu is released.
// Called with b.mu held.
func (nf *nameFile) detachIfIdle(now time.Time) bool {
	select {
	case nf.lk <- struct{}{}:
	default:
		return false
	}
	defer nf.unlockLocal()
	for id, l := range nf.leases {
		if now.UnixNano() < l.rec.Expires {
			return false
		}
		delete(nf.leases, id)
	}
	if nf.pumping || len(nf.waiting) > 0 {
		return false
	}
	nf.closeBell()
	// Under b.mu, so that a new nameFile of the same name, whose watch
	// would get the same descriptor from the kernel, cannot be watching yet.
	if nf.wd >= 0 && nf.b.watch != nil { // b.mu is held: not via removeWatch
		nf.b.watch.remove(nf.wd)
		nf.wd = -1
	}
	return true
}
