package file

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// A doorbell wakes the waiters of one process on one name. It is an
// abstract unix datagram socket that a nameFile binds while its process may
// wait for the name, at an address made of the state file's identity and
// the nameFile's liveness slot: "@sema/DEV:INODE/SLOT". The slot is held by
// one open file at a time, so the address names one live process and
// needs no entry of its own in the state. A step that grants a waiter of
// another process rings the doorbell of that waiter's slot, and only that
// one. The ring carries the grant as written in the state (ring_linux.go),
// so the woken process hands it to its waiting Acquire without taking the
// state lock; anything else it cannot use makes it read the state. The
// kernel frees the address when the process dies.
//
// Datagrams from a process that may not use the directory are dropped
// unread (see access.mayRing): only a process that can write the state
// file may hand grants over, and nobody else may keep a waiter busy.
type doorbell struct {
	f *os.File
}

// bellBase returns "@sema/DEV:INODE/", the address prefix of the
// doorbells on nf's file. Called under lk.
func (nf *nameFile) bellBase() (string, error) {
	if nf.bellPrefix == "" {
		var st unix.Stat_t
		var err error
		if cerr := nf.rc.Control(func(fd uintptr) { err = unix.Fstat(int(fd), &st) }); cerr != nil {
			return "", cerr
		}
		if err != nil {
			return "", fmt.Errorf("fstat: %w", err)
		}
		nf.bellPrefix = fmt.Sprintf("@sema/%x:%x/", st.Dev, st.Ino)
	}
	return nf.bellPrefix, nil
}

// bellAddr is the doorbell address of slot on nf's file.
func (nf *nameFile) bellAddr(slot uint32) (*unix.SockaddrUnix, error) {
	base, err := nf.bellBase()
	if err != nil {
		return nil, err
	}
	return &unix.SockaddrUnix{Name: fmt.Sprintf("%s%x", base, slot)}, nil
}

// openBell binds the doorbell of nf's slot and starts reading it: every
// ring pokes the pump. Called under lk: with the state lock held before
// the first waiter of this backend is written into the queue, or for a
// holder (bindForHolder).
func (nf *nameFile) openBell() error {
	addr, err := nf.bellAddr(uint32(nf.slot))
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		unix.Close(fd)
		return fmt.Errorf("setsockopt(SO_PASSCRED): %w", err)
	}
	if err := unix.Bind(fd, addr); err != nil {
		// EADDRINUSE: the previous holder of the slot is still exiting.
		unix.Close(fd)
		return fmt.Errorf("bind %s: %w", addr.Name, err)
	}
	f := os.NewFile(uintptr(fd), addr.Name) // nonblocking: served by the runtime's poller
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return err
	}
	nf.bell = &doorbell{f: f}
	go nf.listen(rc)
	return nil
}

// bindForHolder binds the doorbell of a name this backend holds leases of,
// so that a force-release can ring it (see tellForced). The backend's
// janitor calls it, about a second after the grant: a lease given back
// sooner, the common short one, never pays for it. A lease force-released
// before, while the doorbell cannot be bound, or beyond maxHolderBells, is
// told at its next renewal. A busy name waits for the next round.
func (nf *nameFile) bindForHolder() {
	select {
	case nf.lk <- struct{}{}:
	default:
		return
	}
	defer nf.unlockLocal()
	if nf.bell != nil || len(nf.leases) == 0 || nf.b.isClosed() || nf.b.holderBells.Load() >= maxHolderBells {
		return
	}
	if nf.openBell() == nil {
		nf.holderBell = true
		nf.b.holderBells.Add(1)
	}
}

// maxHolderBells bounds the doorbells a backend binds for names it only
// holds (each is a descriptor, beside the name's file): a process holding
// thousands of names must not run out of descriptors for them.
const maxHolderBells = 128

// listen reads rings until the doorbell is closed: it hands the grants they
// carry to the waiters, and wakes the pump for any other ring.
func (nf *nameFile) listen(rc syscall.RawConn) {
	buf := make([]byte, maxRing)
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	rc.Read(func(fd uintptr) bool {
		poke, n := false, 0
		for {
			m, oobn, _, _, err := unix.Recvmsg(int(fd), buf, oob, unix.MSG_DONTWAIT)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				// A full queue makes the sender's ring fail (it does not
				// wait): having drained one, read the state.
				if poke || n >= ringQueue() {
					nf.poke()
				}
				return err != unix.EAGAIN // wait for the next ring, or stop
			}
			n++
			nf.b.wakes.Add(1)
			if nf.b.acc.fromAllowed(oob[:oobn]) && !nf.heard(buf[:m]) {
				poke = true
			}
		}
	})
}

// ringQueue is how many rings a doorbell queues before the next is refused
// (net.unix.max_dgram_qlen, 10 by default); 1 if unknown.
var ringQueue = sync.OnceValue(func() int {
	b, err := os.ReadFile("/proc/sys/net/unix/max_dgram_qlen")
	if n, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && n > 1 {
		return n
	}
	return 1
})

// fromAllowed reports whether a datagram's credentials (its control
// message) are of a process that may ring (see mayRing).
func (a access) fromAllowed(oob []byte) bool {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil || len(msgs) != 1 {
		return false
	}
	cred, err := unix.ParseUnixCredentials(&msgs[0])
	return err == nil && a.mayRing(cred)
}

// closeBell unbinds the doorbell. Called under lk, before the file (and
// with it the slot) is let go.
func (nf *nameFile) closeBell() {
	if nf.bell != nil {
		nf.bell.f.Close()
		nf.bell = nil
	}
	if nf.holderBell {
		nf.holderBell = false
		nf.b.holderBells.Add(-1)
	}
}

// ringer sends the rings of one backend, through one unbound socket.
type ringer struct {
	once sync.Once
	f    *os.File
	rc   syscall.RawConn
	err  error
}

// ring sends msg to the doorbell at addr. A doorbell that is not there (its
// process died, or does not wait) is not an error: whoever is there will
// read the state at its next step.
func (r *ringer) ring(addr *unix.SockaddrUnix, msg []byte) {
	r.once.Do(func() {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			r.err = err
			return
		}
		r.f = os.NewFile(uintptr(fd), "ringer")
		r.rc, r.err = r.f.SyscallConn()
	})
	if r.err != nil {
		return
	}
	r.rc.Write(func(fd uintptr) bool {
		for unix.Sendto(int(fd), msg, unix.MSG_DONTWAIT, addr) == unix.EINTR {
		}
		return true
	})
}

func (r *ringer) close() error {
	var err error
	r.once.Do(func() { r.err = errors.New("closed") })
	if r.f != nil {
		err = r.f.Close()
	}
	return err
}
