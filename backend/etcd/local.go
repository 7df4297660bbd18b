package etcd

import "sync"

// locals tracks the entries this backend put and still has, so that a
// waiter whose predecessor — or, at the head of the queue, every holder
// ahead — is one of them is woken in-process, with no watch and no read:
// the goroutines of one process taking turns on a name cost etcd only
// their puts and deletes. A deletion is reported once etcd confirmed it.
// What this backend does not see (an expiry, another process's
// force-release) reaches such a waiter through its bounded re-check.
type locals struct {
	mu sync.Mutex
	m  map[string]*localEntry // by entry key
}

type localEntry struct {
	rev    int64
	weight int64
	held   bool    // granted
	ahead  []entry // when granted: the entries still ahead of it, all holding (never nil)
	subs   []chan<- localEvent
	next   int // how many subscribers watch it as the entry just ahead of theirs
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

// add registers an entry this backend put: waiting, or (if ahead is not
// nil) granted with the entries still ahead of it.
func (l *locals) add(key string, rev, weight int64, ahead []entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[key] = &localEntry{rev: rev, weight: weight, held: ahead != nil, ahead: ahead}
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
	for _, ch := range e.subs {
		ch <- localEvent{key: key, rev: rev, held: true, ahead: ahead}
	}
	return e.next > 0
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
	for _, ch := range e.subs {
		ch <- localEvent{key: key, rev: rev, gone: true, held: e.held}
	}
	return true
}

// weight returns the weight of the entry key created at rev if it is one
// of this backend's, not known to be gone.
func (l *locals) weight(key string, rev int64) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.m[key]
	if e == nil || e.rev != rev {
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
	if e == nil || e.rev != rev {
		return false, nil, false
	}
	e.subs = append(e.subs, ch)
	if next {
		e.next++
	}
	return e.held, e.ahead, true
}

// unsubscribe undoes subscribe.
func (l *locals) unsubscribe(key string, rev int64, ch chan<- localEvent, next bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.m[key]; e != nil && e.rev == rev {
		for i, s := range e.subs {
			if s == ch {
				e.subs = append(e.subs[:i], e.subs[i+1:]...)
				if next {
					e.next--
				}
				break
			}
		}
	}
}
