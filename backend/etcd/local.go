package etcd

import "sync"

// locals tracks the entries this backend puts and still has, so that a
// waiter whose predecessor — or, at the head of the queue, every holder
// ahead — is one of them is woken in-process, with no watch and no read:
// the goroutines of one process taking turns on a name cost etcd only
// their puts and deletes. An entry is registered before its Txn is sent
// (pending, its revision not yet known), so that a waiter that learns of
// it from etcd first still finds it. A deletion is reported once etcd
// confirmed it. What this backend does not see (an expiry, another
// process's force-release) reaches such a waiter through its bounded
// re-check.
type locals struct {
	mu sync.Mutex
	m  map[string]*localEntry // by entry key
}

type localEntry struct {
	rev    int64 // 0 while its Txn is in flight
	weight int64
	held   bool    // granted
	ahead  []entry // when granted: the entries still ahead of it, all holding (never nil)
	subs   []localSub
}

type localSub struct {
	ch   chan<- localEvent
	rev  int64 // the revision the subscriber saw the entry created at
	next bool  // the subscriber is the waiter just behind it
}

// localEvent says that the entry key (created at rev) holds now (with the
// entries still ahead of it), or is gone (and whether it held).
type localEvent struct {
	key   string
	rev   int64
	gone  bool
	held  bool
	ahead []entry
}

// known returns ahead as a list known to be complete: never nil.
func known(ahead []entry) []entry {
	if ahead == nil {
		return []entry{}
	}
	return ahead
}

func newLocals() locals { return locals{m: make(map[string]*localEntry)} }

// pend registers an entry about to be put.
func (l *locals) pend(key string, weight int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[key] = &localEntry{weight: weight}
}

// add records the revision of an entry put (pending or not): waiting, or
// (if ahead is not nil) granted with the entries still ahead of it.
// Subscribers that expected another revision are told it is gone.
func (l *locals) add(key string, rev, weight int64, ahead []entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.m[key]
	if e == nil || e.rev != 0 && e.rev != rev {
		e = &localEntry{}
		l.m[key] = e
	}
	e.rev, e.weight, e.held, e.ahead = rev, weight, ahead != nil, ahead
	e.subs = notify(e.subs, func(s localSub) bool { return s.rev != rev }, localEvent{key: key, gone: true})
}

// unpend forgets a pending entry whose Txn did not put it.
func (l *locals) unpend(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.m[key]; e != nil && e.rev == 0 {
		delete(l.m, key)
		notify(e.subs, func(localSub) bool { return true }, localEvent{key: key, gone: true})
	}
}

// notify sends ev (with each subscriber's revision) to the subscribers
// that match and returns the others.
func notify(subs []localSub, match func(localSub) bool, ev localEvent) []localSub {
	kept := subs[:0]
	for _, s := range subs {
		if match(s) {
			ev.rev = s.rev
			s.ch <- ev
		} else {
			kept = append(kept, s)
		}
	}
	return kept
}

// hold records that the entry is granted, with the entries still ahead of
// it (all holding), and tells its subscribers; it reports whether the
// waiter just behind it is one of them.
func (l *locals) hold(key string, rev int64, ahead []entry) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.m[key]
	if e == nil || e.rev != rev {
		return false
	}
	ahead = known(ahead)
	e.held, e.ahead = true, ahead
	next := false
	for _, s := range e.subs {
		s.ch <- localEvent{key: key, rev: rev, held: true, ahead: ahead}
		next = next || s.next
	}
	return next
}

// gone forgets a deleted entry and tells its subscribers. It reports
// whether the entry was registered.
func (l *locals) gone(key string, rev int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.m[key]
	if e == nil || e.rev != rev {
		return false
	}
	delete(l.m, key)
	notify(e.subs, func(localSub) bool { return true }, localEvent{key: key, gone: true, held: e.held})
	return true
}

// weight returns the weight of the entry key created at rev if it is one
// of this backend's (pending or put), not known to be gone.
func (l *locals) weight(key string, rev int64) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.m[key]
	if e == nil || e.rev != rev && e.rev != 0 {
		return 0, false
	}
	return e.weight, true
}

// subscribe asks for the events of the entry key created at rev on ch,
// which must have room for two events per subscription (it is never
// blocked on); next says the subscriber is the waiter just behind it. ok
// is false if the entry is not one of this backend's (or is gone); held
// and ahead are as hold set them.
func (l *locals) subscribe(key string, rev int64, ch chan<- localEvent, next bool) (held bool, ahead []entry, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.m[key]
	if e == nil || e.rev != rev && e.rev != 0 {
		return false, nil, false
	}
	e.subs = append(e.subs, localSub{ch: ch, rev: rev, next: next})
	return e.held, e.ahead, true
}

// unsubscribe undoes subscribe.
func (l *locals) unsubscribe(key string, ch chan<- localEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.m[key]; e != nil {
		for i, s := range e.subs {
			if s.ch == ch {
				e.subs = append(e.subs[:i], e.subs[i+1:]...)
				break
			}
		}
	}
}
