package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sema-dev/sema"
)

// Timing of the listen connection.
const (
	probeTimeout = 5 * time.Second  // for a notification to come back when the connection opens
	pingEvery    = 15 * time.Second // a silent connection is pinged, so that a dead one is noticed
	maxRedial    = 2 * time.Second  // the longest pause between attempts to reopen it
)

// listener is the backend's one LISTEN connection, shared by every waiting
// Acquire of the backend. It LISTENs on a channel of this backend's own,
// which the requests it queues carry, so that a grant's NOTIFY reaches the
// process that waits for it and no other; and on the channel of
// force-releases (see NotifyForced). It hands the grants each notification
// announces to the waiting requests they are for, and reopens itself when
// the connection breaks. On every (re)opening it first checks that
// notifications reach it (a probe: a NOTIFY sent through the pool must
// come back), and afterwards tells every waiter to look at its request
// again, as notifications may have been lost in between.
type listener struct {
	b       *Backend
	cfg     *pgx.ConnConfig
	channel string // this backend's channel
	ctx     context.Context
	cancel  context.CancelFunc // ends ctx: the listener stops

	mu        sync.Mutex
	running   bool
	exited    chan struct{}
	waiters   map[string][]*waiter // by lease ID (one ID may wait on several names)
	byName    map[string]int       // how many waiters each name has
	gen       uint64               // number of the open connection; changes at each (re)opening
	connected bool                 // the connection of gen is open, its LISTENs in place
	attempts  int                  // connection attempts finished
	misrouted error                // the last opening's probe got nothing back
	changed   chan struct{}        // closed (and replaced) when the state above changes

	reconnects atomic.Int64
}

// waiter is a waiting Acquire's registration.
type waiter struct {
	name    string
	id      string
	gen     uint64        // the connection open when registered, 0 if none
	grant   chan grantMsg // a grant of this request was announced
	recheck chan struct{} // look at the request again (notifications may have been lost)
}

// probePayload is what the probe sends on the listener's own channel.
const probePayload = "probe"

var errMisrouted = errors.New("notifications sent through the pool do not reach the listen connection: " +
	"it goes through a transaction-mode pooler (PgBouncer?); point the listen URL " +
	"(Config.ListenURL, or sema_listen=host:port in the URL) at the database itself")

func newListener(b *Backend, cfg *pgx.ConnConfig) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	return &listener{
		b: b, cfg: cfg, channel: "sema_w_" + strings.ToLower(rand.Text()), ctx: ctx, cancel: cancel,
		waiters: map[string][]*waiter{}, byName: map[string]int{}, changed: make(chan struct{}),
	}
}

// register makes the grants announced for lease id of name reach the
// returned waiter. It does not open the connection: see ensure.
func (l *listener) register(name, id string) *waiter {
	w := &waiter{name: name, id: id, grant: make(chan grantMsg, 1), recheck: make(chan struct{}, 1)}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.connected {
		w.gen = l.gen
	}
	l.waiters[id] = append(l.waiters[id], w)
	l.byName[name]++
	return w
}

func (l *listener) unregister(w *waiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ws := slices.DeleteFunc(l.waiters[w.id], func(x *waiter) bool { return x == w })
	if len(ws) == 0 {
		delete(l.waiters, w.id)
	} else {
		l.waiters[w.id] = ws
	}
	if l.byName[w.name]--; l.byName[w.name] <= 0 {
		delete(l.byName, w.name)
	}
}

// waiting returns how many of this backend's waiters wait for name.
func (l *listener) waiting(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byName[name]
}

// recheckLocked tells every waiter to look at its request again.
func (l *listener) recheckLocked() {
	for _, ws := range l.waiters {
		for _, w := range ws {
			poke(w.recheck)
		}
	}
}

// ensure makes sure that notifications reach w from now on. poll reports
// whether one could have been missed since w registered (the caller then
// looks at its request once). It fails only if the listen connection
// cannot receive notifications at all (errMisrouted); while the database
// is unreachable the waiter polls, and is told to look again when the
// connection is back.
func (l *listener) ensure(ctx context.Context, w *waiter) (poll bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.gen != 0 && w.gen == l.gen && l.connected {
		return false, nil
	}
	l.startLocked()
	for {
		switch {
		case l.misrouted != nil:
			return true, fmt.Errorf("postgres: %w: %w", sema.ErrUnavailable, l.misrouted)
		case l.connected, l.attempts > 0:
			return true, nil
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		case <-l.ctx.Done():
		}
		l.mu.Lock()
		if ctx.Err() != nil || l.ctx.Err() != nil {
			return true, nil
		}
	}
}

// start starts the connection's loop unless it runs.
func (l *listener) start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.startLocked()
}

func (l *listener) startLocked() {
	if !l.running && l.ctx.Err() == nil {
		l.running = true
		l.exited = make(chan struct{})
		go l.run()
	}
}

// changedLocked wakes those waiting in ensure.
func (l *listener) changedLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// stop closes the connection and waits for the loop to end.
func (l *listener) stop() {
	l.cancel()
	l.mu.Lock()
	running, exited := l.running, l.exited
	l.mu.Unlock()
	if running {
		<-exited
	}
}

// dispatch hands the grants a notification announces to their waiters. A
// payload that is not sema's makes every waiter look again.
func (l *listener) dispatch(n *pgconn.Notification) {
	switch {
	case n.Channel == l.b.forced:
		l.b.notices.Heard(n.Payload)
		return
	case n.Channel != l.channel || n.Payload == probePayload:
		return
	}
	gs, err := parsePayload(n.Payload)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.b.log.Debug("postgres: ignoring a notification", "channel", n.Channel, "err", err)
		l.recheckLocked()
		return
	}
	l.handLocked("", gs)
}

// deliver hands grants made by a step of this backend to its waiters at
// once, without waiting for their notification.
func (l *listener) deliver(grants []row) {
	if len(grants) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range grants {
		l.handLocked(r.name, []grantMsg{{id: r.id, token: r.token, acquired: r.t1}})
	}
}

// handLocked hands grants of name to their waiters. A notification does
// not say the name (""): its grant goes to the one waiter of its ID, and
// if the ID waits on several names here (a client of sema serve may reuse
// an ID), they look at their requests instead.
func (l *listener) handLocked(name string, gs []grantMsg) {
	for _, g := range gs {
		ws := l.waiters[g.id]
		for _, w := range ws {
			switch {
			case w.name == name || name == "" && len(ws) == 1:
				select {
				case w.grant <- g:
				default: // it has one already: the same grant, announced twice
				}
			case name == "":
				poke(w.recheck)
			}
		}
	}
}

// poke sends on a signal channel of capacity 1 without blocking.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
