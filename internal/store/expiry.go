package store

import "time"

// timerSlack bounds how often the expiry timer wakes up under churn.
const timerSlack = 2 * time.Millisecond

// expiryHeap orders live leases by expiry so that one timer frees them at
// their time, without polling and without one timer per lease.
type expiryHeap []*lease

func (h *expiryHeap) push(l *lease) {
	l.hidx = int32(len(*h))
	*h = append(*h, l)
	h.up(int(l.hidx))
}

func (h *expiryHeap) remove(l *lease) {
	i := int(l.hidx)
	last := len(*h) - 1
	if i != last {
		h.swap(i, last)
	}
	(*h)[last] = nil
	*h = (*h)[:last]
	l.hidx = -1
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
}

// fix restores the order after l.expires changed.
func (h *expiryHeap) fix(l *lease) {
	i := int(l.hidx)
	if !h.down(i) {
		h.up(i)
	}
}

func (h expiryHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx = int32(i)
	h[j].hidx = int32(j)
}

func (h expiryHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].expires <= h[i].expires {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h expiryHeap) down(i int) bool {
	start := i
	n := len(h)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h[r].expires < h[c].expires {
			c = r
		}
		if h[i].expires <= h[c].expires {
			break
		}
		h.swap(i, c)
		i = c
	}
	return i > start
}

// armTimer makes sure the expiry timer fires no later than at (monotonic
// nanoseconds). Callers hold s.mu.
func (s *Store) armTimer(at int64) {
	if s.timerAt != 0 && s.timerAt <= at {
		return
	}
	s.timerAt = at
	d := time.Duration(at-s.mono()) + time.Millisecond
	if s.timer == nil {
		s.timer = time.AfterFunc(d, s.onTimer)
	} else {
		s.timer.Reset(d)
	}
}

// onTimer expires every lease whose time is up and re-arms for the next.
func (s *Store) onTimer() {
	s.mu.Lock()
	defer s.unlock()
	s.timerAt = 0
	if s.closed {
		return
	}
	now := s.mono()
	var touched []*entry
	for len(s.heap) > 0 && s.heap[0].expires <= now {
		l := s.heap[0]
		if l == l.e.fence {
			s.liftFence(l.e)
		} else {
			s.endLocked(l, endExpire, now)
		}
		touched = append(touched, l.e)
	}
	for _, e := range touched {
		s.grantWaiters(e, now)
		s.dropIfIdle(e)
	}
	if len(s.heap) > 0 {
		// Coalesce wake-ups: expiry may run a little late (which only
		// holds permits longer), never early.
		s.armTimer(max(s.heap[0].expires, now+int64(timerSlack)))
	}
	s.maybeSnapshot()
}
