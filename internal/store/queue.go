package store

import (
	"fmt"

	"github.com/sema-dev/sema"
)

// waiter is one acquire from AcquireAsync until it is answered: queued
// (queued), then granted (lease) or failed (err).
type waiter struct {
	req        sema.Request
	principal  string
	admin      bool
	done       func(sema.Grant, error)
	e          *entry // the queue it is in
	since      int64
	prev, next *waiter
	queued     bool
	lease      *lease
	grant      sema.Grant
	fresh      bool // lease was granted to it (not a retry's): give it back if the log fails
	early      bool // answered before the grant's record is on disk (fast.go)
	err        error
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
		old.queued = false
		old.err = fmt.Errorf("store: acquire %q: superseded by a retry with the same lease id: %w", e.name, sema.ErrNotAcquired)
		s.answerLater(old)
	} else {
		e.waiters.push(w)
		s.waiting.Add(1)
	}
	w.e, w.queued = e, true
	s.queued[k] = w
	s.queuedPeak = max(s.queuedPeak, len(s.queued))
	return nil
}

// dequeue removes w from e's queue. Callers hold s.mu.
func (s *Store) dequeue(e *entry, w *waiter) {
	e.waiters.remove(w)
	w.queued = false
	s.waiting.Add(-1)
	delete(s.queued, e.name+"\x00"+w.req.ID)
	if len(s.queued) == 0 && s.queuedPeak > 1024 {
		// A map never shrinks: after a crowd of waiters has gone, let its
		// memory go too.
		s.queued, s.queuedPeak = make(map[string]*waiter), 0
	}
}
