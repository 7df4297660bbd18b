package lockbench

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// ticketLock is the contend scenario's reference FIFO lock: a ticket lock
// in a shared mapping of a file beside the counter, each waiter asleep in
// futex(2) on a word of its own, so that an unlock wakes the next process
// in line and no other. It keeps nothing but its two counters: no owner,
// no expiry, no liveness (a holder that dies stops it, and its waiters
// fail after ticketStuck: it is for the benchmark only). It is what a
// strictly FIFO hand-off between processes costs at least: what sema
// costs beyond it is sema's own work, and what flock(2) gains over it is
// its barging.
type ticketLock struct {
	mem     []byte
	next    *uint32 // the next ticket to hand out
	serving *uint32 // the ticket that may hold the lock
	slots   []uint32
}

// The ticket file: next and serving, then one futex word per slot; the
// waiter with ticket t sleeps on slot t mod ticketSlots. Slots outnumber
// the processes of a run (at most 1,000), so no two waiters share one.
const (
	ticketSlots    = 1024
	ticketSlotsOff = 64
	ticketFileSize = ticketSlotsOff + 4*ticketSlots
)

// ticketStuck is how long a wait sees the same ticket served before it
// gives up: far longer than any increment of the benchmark takes.
var ticketStuck = 10 * time.Second

// futex(2) operations on a shared (not process-private) word.
const (
	futexWait = 0
	futexWake = 1
)

// resetTicketLock writes a fresh ticket file at path.
func resetTicketLock(path string) error {
	return os.WriteFile(path, make([]byte, ticketFileSize), 0o600)
}

func openTicketLock(path string) (*ticketLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, ticketFileSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("ticket lock %s: %w", path, err)
	}
	return &ticketLock{
		mem:     mem,
		next:    (*uint32)(unsafe.Pointer(&mem[0])),
		serving: (*uint32)(unsafe.Pointer(&mem[4])),
		slots:   unsafe.Slice((*uint32)(unsafe.Pointer(&mem[ticketSlotsOff])), ticketSlots),
	}, nil
}

// lock takes a ticket and sleeps until it is served. A ticket cannot be
// given back, so a wait that ctx ends leaves the lock unusable: the round
// fails, as it does when the lock stops moving for ticketStuck (its holder
// or a process in line died).
func (t *ticketLock) lock(ctx context.Context) (func() error, error) {
	my := atomic.AddUint32(t.next, 1) - 1
	w := &t.slots[my%ticketSlots]
	timeout := syscall.NsecToTimespec(int64(100 * time.Millisecond))
	seen, since := atomic.LoadUint32(t.serving), time.Now()
	for {
		seq := atomic.LoadUint32(w) // before the check: an unlock after it changes w
		serving := atomic.LoadUint32(t.serving)
		if serving == my {
			return func() error { t.unlock(my); return nil }, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if serving != seen {
			seen, since = serving, time.Now()
		} else if time.Since(since) > ticketStuck {
			return nil, fmt.Errorf("ticket lock: ticket %d served for %v: a process holding or in line died", serving, ticketStuck)
		}
		errno := futex(w, futexWait, seq, &timeout)
		if errno != 0 && errno != syscall.EAGAIN && errno != syscall.EINTR && errno != syscall.ETIMEDOUT {
			return nil, fmt.Errorf("ticket lock: futex wait: %w", errno)
		}
	}
}

// unlock serves the next ticket and wakes its waiter.
func (t *ticketLock) unlock(my uint32) {
	atomic.StoreUint32(t.serving, my+1)
	w := &t.slots[(my+1)%ticketSlots]
	atomic.AddUint32(w, 1)
	futex(w, futexWake, 1, nil)
}

// futex calls futex(2) on the shared word w: x/sys has no wrapper for it.
func futex(w *uint32, op int, val uint32, timeout *syscall.Timespec) syscall.Errno {
	_, _, errno := syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(w)), uintptr(op), uintptr(val),
		uintptr(unsafe.Pointer(timeout)), 0, 0)
	return errno
}

func (t *ticketLock) close() error { return syscall.Munmap(t.mem) }
