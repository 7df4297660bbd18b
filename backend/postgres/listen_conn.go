package postgres

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

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
		was := l.connected || l.attempts == 0
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
		log := l.b.log.Debug
		if was {
			log = l.b.log.Warn // once per outage, not at every attempt
		}
		log("postgres: no listen connection; waiters look at their requests until it is back", "err", err, "retry", delay)
		select {
		case <-l.ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, maxRedial)
	}
}

// open connects, LISTENs on the probe channel, the channel of
// force-releases and every channel with waiters, checks with the probe that notifications arrive, and tells
// every waiter to look again.
func (l *listener) open() (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(l.ctx, connectTimeout+probeTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	chans := []string{l.probe, l.b.forced}
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
	for _, c := range chans[2:] {
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
