package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
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
	linger       = 30 * time.Second // a channel nobody here waits on is kept that long before UNLISTEN
	maxRedial    = 2 * time.Second  // the longest pause between attempts to reopen it
)

// listener is the backend's one LISTEN connection, shared by every waiting
// Acquire of the backend: it LISTENs on the channel of each name this
// process waits for, hands the grants each notification announces to the
// waiting requests they are for, and reopens itself when the connection
// breaks. On every (re)opening it first checks that notifications reach it
// (a probe: a NOTIFY sent through the pool must come back), and afterwards
// tells every waiter to look at its request again, as notifications may
// have been lost in between.
type listener struct {
	b     *Backend
	cfg   *pgx.ConnConfig
	probe string // this listener's probe channel
	ctx   context.Context
	stop_ context.CancelFunc

	mu        sync.Mutex
	running   bool
	exited    chan struct{}
	chans     map[string]*chanState
	waiters   map[string]*waiter // by lease ID
	gen       uint64             // number of the open connection; changes at each (re)opening
	connected bool               // the connection of gen is open, its LISTENs in place
	attempts  int                // connection attempts finished
	misrouted error              // the last opening's probe got nothing back
	changed   chan struct{}      // closed (and replaced) when the state above changes
	pending   bool               // a LISTEN or UNLISTEN is due
	interrupt context.CancelFunc // interrupts the wait for a notification

	reconnects atomic.Int64
}

type chanState struct {
	waiters  int       // registered waiters of this backend
	listened uint64    // gen of the connection LISTENing on it, 0 if none
	idle     time.Time // when its last waiter left
}

// waiter is a waiting Acquire's registration.
type waiter struct {
	id, channel string
	gen         uint64        // the connection that covered the channel when registered, 0 if none
	grant       chan grantMsg // a grant of this request was announced
	recheck     chan struct{} // look at the request again (notifications may have been lost)
}

var errMisrouted = errors.New("notifications sent through the pool do not reach the listen connection: " +
	"it goes through a transaction-mode pooler (PgBouncer?); point the listen URL " +
	"(Config.ListenURL, or sema_listen=host:port in the URL) at the database itself")

func newListener(b *Backend, cfg *pgx.ConnConfig) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	return &listener{
		b: b, cfg: cfg, probe: "sema_probe_" + strings.ToLower(rand.Text()[:16]), ctx: ctx, stop_: cancel,
		chans: map[string]*chanState{}, waiters: map[string]*waiter{}, changed: make(chan struct{}),
	}
}

// register makes the grants announced for lease id reach the returned
// waiter. It does not LISTEN: see ensure.
func (l *listener) register(channel, id string) *waiter {
	w := &waiter{id: id, channel: channel, grant: make(chan grantMsg, 1), recheck: make(chan struct{}, 1)}
	l.mu.Lock()
	defer l.mu.Unlock()
	cs := l.chans[channel]
	if cs == nil {
		cs = &chanState{}
		l.chans[channel] = cs
	}
	cs.waiters++
	if l.connected && cs.listened == l.gen {
		w.gen = l.gen
	}
	l.waiters[id] = w
	return w
}

func (l *listener) unregister(w *waiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waiters[w.id] == w {
		delete(l.waiters, w.id)
	}
	if cs := l.chans[w.channel]; cs != nil {
		if cs.waiters--; cs.waiters == 0 {
			cs.idle = time.Now()
		}
	}
}

// ensure makes sure that notifications on w's channel reach w from now on.
// poll reports whether one could have been missed since w registered (the
// caller then looks at its request once). It fails only if the listen
// connection cannot receive notifications at all (errMisrouted); while the
// database is unreachable the waiter polls, and is told to look again when
// the connection is back.
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
		case l.connected && l.chans[w.channel].listened == l.gen:
			return true, nil
		case !l.connected && l.attempts > 0:
			return true, nil
		case l.connected:
			l.pending = true
			if l.interrupt != nil {
				l.interrupt()
			}
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
	l.stop_()
	l.mu.Lock()
	running, exited := l.running, l.exited
	l.mu.Unlock()
	if running {
		<-exited
	}
}

// run keeps a listen connection open until the backend closes.
func (l *listener) run() {
	defer close(l.exited)
	delay := 50 * time.Millisecond
	for l.ctx.Err() == nil {
		conn, err := l.open()
		if err == nil {
			delay = 50 * time.Millisecond
			err = l.serve(conn)
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = conn.Close(cctx)
			cancel()
		}
		l.mu.Lock()
		l.connected = false
		l.attempts++
		if errors.Is(err, errMisrouted) {
			l.misrouted = err
		}
		l.changedLocked()
		l.mu.Unlock()
		if l.ctx.Err() != nil {
			return
		}
		l.b.log.Warn("postgres: listen connection lost; waiters poll until it is back", "err", err, "retry", delay)
		select {
		case <-l.ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, maxRedial)
	}
}

// open connects, LISTENs on the probe channel and on every channel with
// waiters, checks with the probe that notifications arrive, and tells
// every waiter to look again.
func (l *listener) open() (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(l.ctx, connectTimeout+probeTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	chans := []string{l.probe}
	for c, cs := range l.chans {
		if cs.waiters > 0 {
			chans = append(chans, c)
		}
	}
	l.mu.Unlock()
	err = l.exec(ctx, conn, "LISTEN", chans)
	if err == nil {
		err = l.checkProbe(ctx, conn)
	}
	if err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	l.reconnects.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	l.connected, l.misrouted = true, nil
	l.attempts++
	for _, c := range chans[1:] {
		if cs := l.chans[c]; cs != nil {
			cs.listened = l.gen
		}
	}
	l.pending = true // channels registered meanwhile
	for _, w := range l.waiters {
		poke(w.recheck)
	}
	l.changedLocked()
	return conn, nil
}

// exec runs LISTEN or UNLISTEN on channels, in one round trip.
func (l *listener) exec(ctx context.Context, conn *pgx.Conn, verb string, chans []string) error {
	var sb strings.Builder
	for _, c := range chans {
		sb.WriteString(verb + " " + pgx.Identifier{c}.Sanitize() + ";")
	}
	_, err := conn.Exec(ctx, sb.String())
	return err
}

// checkProbe sends a notification on the probe channel through the pool
// and waits for it on conn.
func (l *listener) checkProbe(ctx context.Context, conn *pgx.Conn) error {
	if _, err := l.b.pool.Exec(ctx, "SELECT pg_notify($1, 'probe')", l.probe); err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(pctx)
		if n != nil && n.Channel == l.probe {
			return nil
		}
		if n != nil {
			l.dispatch(n)
		}
		if err != nil {
			if pctx.Err() != nil && ctx.Err() == nil {
				return errMisrouted
			}
			return err
		}
	}
}

// serve waits for notifications on conn and keeps its LISTENs in line with
// the waiters, until the connection fails or the backend closes.
func (l *listener) serve(conn *pgx.Conn) error {
	for {
		if err := l.relisten(conn); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(l.ctx, pingEvery)
		l.mu.Lock()
		if l.pending {
			l.mu.Unlock()
			cancel()
			continue
		}
		l.interrupt = cancel
		l.mu.Unlock()
		n, err := conn.WaitForNotification(ctx)
		l.mu.Lock()
		l.interrupt = nil
		l.mu.Unlock()
		timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
		cancel()
		if n != nil {
			l.dispatch(n)
		}
		switch {
		case l.ctx.Err() != nil:
			return l.ctx.Err()
		case err == nil:
		case conn.IsClosed():
			return err
		case timedOut:
			pctx, pcancel := context.WithTimeout(l.ctx, connectTimeout)
			err = conn.Ping(pctx)
			pcancel()
			if err != nil {
				return err
			}
		case errors.Is(ctx.Err(), context.Canceled): // interrupted to LISTEN
		default:
			return err
		}
	}
}

// relisten LISTENs on the channels that got waiters and UNLISTENs those
// idle for longer than linger.
func (l *listener) relisten(conn *pgx.Conn) error {
	l.mu.Lock()
	l.pending = false
	var on, off []string
	for c, cs := range l.chans {
		switch {
		case cs.waiters > 0 && cs.listened != l.gen:
			on = append(on, c)
		case cs.waiters == 0 && time.Since(cs.idle) > linger:
			if cs.listened == l.gen {
				off = append(off, c)
			} else {
				delete(l.chans, c)
			}
		}
	}
	gen := l.gen
	l.mu.Unlock()
	if len(on)+len(off) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(l.ctx, connectTimeout)
	defer cancel()
	if len(on) > 0 {
		if err := l.exec(ctx, conn, "LISTEN", on); err != nil {
			return err
		}
	}
	if len(off) > 0 {
		if err := l.exec(ctx, conn, "UNLISTEN", off); err != nil {
			return err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range on {
		if cs := l.chans[c]; cs != nil {
			cs.listened = gen
		}
	}
	for _, c := range off {
		if cs := l.chans[c]; cs != nil {
			if cs.waiters == 0 {
				delete(l.chans, c)
			} else {
				cs.listened = 0 // a waiter came meanwhile: LISTEN again
				l.pending = true
			}
		}
	}
	l.changedLocked()
	return nil
}

// dispatch hands the grants a notification announces to their waiters. A
// payload that is not sema's makes the channel's waiters look again.
func (l *listener) dispatch(n *pgconn.Notification) {
	if n.Channel == l.probe {
		return
	}
	gs, err := parsePayload(n.Payload)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.b.log.Debug("postgres: ignoring a notification", "channel", n.Channel, "err", err)
		for _, w := range l.waiters {
			if w.channel == n.Channel {
				poke(w.recheck)
			}
		}
		return
	}
	l.handLocked(n.Channel, gs)
}

// deliver hands grants made by a step of this backend to its waiters at
// once, without waiting for their notification.
func (l *listener) deliver(channel string, grants []row) {
	if len(grants) == 0 {
		return
	}
	gs := make([]grantMsg, len(grants))
	for i := range grants {
		gs[i] = grantMsg{id: grants[i].id, token: grants[i].token, acquired: grants[i].t1}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.handLocked(channel, gs)
}

func (l *listener) handLocked(channel string, gs []grantMsg) {
	for _, g := range gs {
		if w := l.waiters[g.id]; w != nil && w.channel == channel {
			select {
			case w.grant <- g:
			default: // it has one already: the same grant, announced twice
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
