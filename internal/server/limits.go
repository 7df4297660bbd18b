package server

import (
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"sync"
	"time"
)

// Errors of the bounds, answered with HTTP 429 (codes too_many_waiters and
// too_many_connections).
var (
	errTooManyWaiters = errors.New("too many waiting acquires")
	errTooManyConns   = errors.New("too many sema-mux connections")
)

// limits bounds what clients may hold open on the server: waiting
// acquires, per principal and overall, and sema-mux connections per
// principal. It also knows every waiting acquire, to end them at shutdown.
type limits struct {
	maxWaiters, perPrincipal, connsPerPrincipal int

	mu       sync.Mutex
	waiters  int
	peak     int  // the most waiters since memory was last given back
	trimming bool // memory will be given back (trim)
	use      map[string]*usage
	polls    map[*poll]struct{}
	closed   bool
}

// usage is what one principal holds open.
type usage struct{ waiters, conns int }

func newLimits(cfg *Config) *limits {
	return &limits{maxWaiters: cfg.MaxWaiters, perPrincipal: cfg.MaxWaitersPerPrincipal,
		connsPerPrincipal: cfg.MaxConnsPerPrincipal,
		use:               make(map[string]*usage), polls: make(map[*poll]struct{})}
}

// addWaiter counts p, a waiting acquire of key, unless a bound is
// reached or the server is closing.
func (l *limits) addWaiter(key string, p *poll) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.use[key]
	switch {
	case l.closed:
		return errShuttingDown
	case l.waiters >= l.maxWaiters:
		return fmt.Errorf("%w: the server has %d, its most", errTooManyWaiters, l.waiters)
	case u != nil && u.waiters >= l.perPrincipal:
		return fmt.Errorf("%w: this client has %d, its most", errTooManyWaiters, u.waiters)
	}
	if u == nil {
		u = &usage{}
		l.use[key] = u
	}
	u.waiters++
	l.waiters++
	l.peak = max(l.peak, l.waiters)
	l.polls[p] = struct{}{}
	return nil
}

// doneWaiter uncounts p. Once most of a crowd of waiters has left, the
// memory it took is given back to the system.
func (l *limits) doneWaiter(key string, p *poll) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.polls, p)
	l.waiters--
	if u := l.use[key]; u != nil {
		if u.waiters--; u.waiters == 0 && u.conns == 0 {
			delete(l.use, key)
		}
	}
	if l.peak >= trimWaiters && l.waiters <= l.peak/8 && !l.trimming {
		// Once the rest of the crowd has gone too (a moment later), give
		// its memory back.
		l.peak, l.trimming = l.waiters, true
		time.AfterFunc(trimDelay, l.trim)
	}
}

// A crowd of trimWaiters waiters or more that has left has its memory
// given back to the system trimDelay later.
const (
	trimWaiters = 1 << 14
	trimDelay   = time.Second
)

// trim gives the memory of a crowd of waiters that has left back to the
// system.
func (l *limits) trim() {
	l.mu.Lock()
	if len(l.polls) < trimWaiters/8 {
		l.polls = maps.Clone(l.polls) // a map never shrinks
	}
	l.trimming = false
	l.mu.Unlock()
	debug.FreeOSMemory()
}

// addConn counts a sema-mux connection of key, unless its bound is
// reached.
func (l *limits) addConn(key string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.use[key]
	if u != nil && u.conns >= l.connsPerPrincipal {
		return fmt.Errorf("%w: this client has %d open, its most", errTooManyConns, u.conns)
	}
	if u == nil {
		u = &usage{}
		l.use[key] = u
	}
	u.conns++
	return nil
}

func (l *limits) doneConn(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if u := l.use[key]; u != nil {
		if u.conns--; u.waiters == 0 && u.conns == 0 {
			delete(l.use, key)
		}
	}
}

// close refuses new waiters from now on and returns those waiting.
func (l *limits) close() []*poll {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	ps := make([]*poll, 0, len(l.polls))
	for p := range l.polls {
		ps = append(ps, p)
	}
	return ps
}
