package store

import (
	"fmt"
	"time"

	"github.com/sema-dev/sema"
)

// waiter is one queued acquire.
type waiter struct {
	req        sema.Request
	principal  string
	admin      bool
	since      int64
	prev, next *waiter
	ready      chan struct{} // closed once lease or err is set
	lease      *lease
	early      bool // lease may be answered before its record is on disk
	waited     time.Duration
	err        error
	notify     func(*Wait) // an AcquireAsync's: called once granted or failed
	async      *Wait
	cancelled  bool
}

// queue is an intrusive FIFO list of waiters.
type queue struct {
	head, tail *waiter
	len        int
}

func (q *queue) push(w *waiter) {
	w.prev, w.next = q.tail, nil
	if q.tail == nil {
		q.head = w
	} else {
		q.tail.next = w
	}
	q.tail = w
	q.len++
}

// replace puts w in old's place in the queue.
func (q *queue) replace(old, w *waiter) {
	w.prev, w.next = old.prev, old.next
	if w.prev == nil {
		q.head = w
	} else {
		w.prev.next = w
	}
	if w.next == nil {
		q.tail = w
	} else {
		w.next.prev = w
	}
	old.prev, old.next = nil, nil
}

func (q *queue) remove(w *waiter) {
	if w.prev == nil {
		q.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		q.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.prev, w.next = nil, nil
	q.len--
}

// enqueue queues w on e. A queued request with the same name and lease ID
// (a client retrying after a lost connection) is replaced in place: the
// retry keeps the original's turn and the original fails. Callers hold
// s.mu.
func (s *Store) enqueue(e *entry, w *waiter) error {
	k := e.name + "\x00" + w.req.ID
	if old := s.queued[k]; old != nil {
		if old.principal != w.principal && !w.admin {
			return fmt.Errorf("store: acquire %q: %w", e.name, ErrForbidden)
		}
		e.waiters.replace(old, w)
		old.err = fmt.Errorf("store: acquire %q: superseded by a retry with the same lease id: %w", e.name, sema.ErrNotAcquired)
		close(old.ready)
		s.queueNotify(old)
	} else {
		e.waiters.push(w)
		s.waiting.Add(1)
	}
	s.queued[k] = w
	return nil
}

// dequeue removes w from e's queue. Callers hold s.mu.
func (s *Store) dequeue(e *entry, w *waiter) {
	e.waiters.remove(w)
	s.waiting.Add(-1)
	delete(s.queued, e.name+"\x00"+w.req.ID)
}
