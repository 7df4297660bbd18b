package postgres

import (
	"context"
	"errors"
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

// open connects, LISTENs on the backend's channel and the channel of
// force-releases, checks with the probe that notifications arrive, and
// tells every waiter to look again.
func (l *listener) open() (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(l.ctx, connectTimeout+probeTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return nil, err
	}
	_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()+"; LISTEN "+pgx.Identifier{l.b.forced}.Sanitize())
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
	l.recheckLocked()
	l.changedLocked()
	return conn, nil
}

// checkProbe sends a notification on the backend's channel through the
// pool and waits for it on conn.
func (l *listener) checkProbe(ctx context.Context, conn *pgx.Conn) error {
	if _, err := l.b.pool.Exec(ctx, "SELECT pg_notify($1, $2)", l.channel, probePayload); err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(pctx)
		if n != nil && n.Channel == l.channel && n.Payload == probePayload {
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

// serve waits for notifications on conn until the connection fails or the
// backend closes; a connection silent for pingEvery is pinged.
func (l *listener) serve(conn *pgx.Conn) error {
	for {
		ctx, cancel := context.WithTimeout(l.ctx, pingEvery)
		n, err := conn.WaitForNotification(ctx)
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
		default:
			return err
		}
	}
}
