package sema

import (
	"sync"
	"time"
)

// sched wakes a client's leases for their renewals and deadlines: a min-heap
// of leases by wake-up time and one runtime timer armed for the earliest.
// Arming a lease is a heap push under a mutex; the runtime timer is touched
// only when the new wake-up comes before the one armed, and a lease that
// ends is just removed from the heap (the timer may then fire for nothing
// and re-arm). So a lease released before its first renewal — the common
// case — usually costs no runtime timer operation at all. A client has a few
// scheds so that goroutines on distinct names rarely share a mutex.
type sched struct {
	mu    sync.Mutex
	c     *Client
	heap  []*Lease
	t     *time.Timer   // created on first use, inside the caller's synctest bubble if any
	armed time.Duration // when t fires, by c.now(); 0: not armed
}

// nScheds is the number of scheds per client.
const nScheds = 8

// schedFor picks the lease's sched from its ID (random: an even spread).
func (c *Client) schedFor(id string) *sched {
	var h byte
	if n := len(id); n > 0 {
		h = id[n-1]
	}
	return &c.scheds[h%nScheds]
}

// set makes l wake at when (client clock), inserting or moving it.
func (s *sched) set(l *Lease, when, now time.Duration) {
	s.mu.Lock()
	l.wake = when
	if l.hidx < 0 {
		l.hidx = int32(len(s.heap))
		s.heap = append(s.heap, l)
		s.up(len(s.heap) - 1)
	} else {
		s.fix(int(l.hidx))
	}
	if s.armed == 0 || when < s.armed {
		s.arm(when, now)
	}
	s.mu.Unlock()
}

// remove takes l out of the heap; it is a no-op if l is not in it.
func (s *sched) remove(l *Lease) {
	s.mu.Lock()
	if l.hidx >= 0 {
		s.removeAt(int(l.hidx))
	}
	s.mu.Unlock()
}

func (s *sched) arm(when, now time.Duration) {
	s.armed = max(when, now+1) // never 0
	if s.t == nil {
		s.t = time.AfterFunc(when-now, s.fire)
	} else {
		s.t.Reset(when - now)
	}
}

// fire runs the ticks that are due, each on its own goroutine (a tick may
// wait for a renewal), and re-arms the timer for the next wake-up.
func (s *sched) fire() {
	var due []*Lease
	s.mu.Lock()
	now := s.c.now()
	s.armed = 0
	for len(s.heap) > 0 && s.heap[0].wake <= now {
		due = append(due, s.removeAt(0))
	}
	if len(s.heap) > 0 {
		s.arm(s.heap[0].wake, now)
	}
	s.mu.Unlock()
	for _, l := range due {
		go l.tick()
	}
}

// removeAt takes the lease at index i out of the heap and returns it.
func (s *sched) removeAt(i int) *Lease {
	l := s.heap[i]
	last := len(s.heap) - 1
	s.swap(i, last)
	s.heap[last] = nil
	s.heap = s.heap[:last]
	if i < last {
		s.fix(i)
	}
	l.hidx = -1
	return l
}

func (s *sched) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.heap[i].hidx = int32(i)
	s.heap[j].hidx = int32(j)
}

func (s *sched) fix(i int) {
	if !s.down(i) {
		s.up(i)
	}
}

func (s *sched) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if s.heap[p].wake <= s.heap[i].wake {
			return
		}
		s.swap(i, p)
		i = p
	}
}

// down sifts i down and reports whether it moved.
func (s *sched) down(i int) bool {
	start, n := i, len(s.heap)
	for {
		m := 2*i + 1
		if m >= n {
			break
		}
		if r := m + 1; r < n && s.heap[r].wake < s.heap[m].wake {
			m = r
		}
		if s.heap[i].wake <= s.heap[m].wake {
			break
		}
		s.swap(i, m)
		i = m
	}
	return i > start
}
