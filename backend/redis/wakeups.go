package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sema-dev/sema"
)

// wakeups is a backend's subscription to its own channel and the waits it
// serves.
type wakeups struct {
	ready atomic.Bool // ps is subscribed
	mu    sync.Mutex
	ps    *goredis.PubSub        // nil until the first wait
	sub   *subAttempt            // the subscription being made, if any
	ws    map[string]chan string // lease ID → its wake-ups: a grant message, or "" (look again)
	early map[string]earlyGrant  // grant messages that came before their wait registered
}

// subAttempt is one attempt to subscribe; done is closed when it ends,
// with err set if it failed.
type subAttempt struct {
	done chan struct{}
	err  error
}

// earlyGrant is a grant message kept for a wait that registers after it
// came (the grant can be made as soon as the request is queued).
type earlyGrant struct {
	msg string
	at  time.Time
}

// subscribe makes this backend listen on its channel, once; it returns
// when Redis has confirmed the subscription, when ctx ends or when the
// backend is closed. The subscription serves every later wait, so it is
// made by a goroutine of its own, bounded by a timeout of its own: neither
// a caller whose ctx ends nor Close waits for a server that does not
// answer.
func (b *Backend) subscribe(ctx context.Context) error {
	if b.wake.subscribed() {
		return nil
	}
	a := b.wake.attempt(b)
	select {
	case <-a.done:
		return a.err
	case <-ctx.Done():
		return wrap("subscribe to wake-ups", "", context.Cause(ctx))
	case <-b.done:
		return fmt.Errorf("redis: subscribe to wake-ups: %w", sema.ErrClosed)
	}
}

// attempt returns the attempt to subscribe in progress, starting one if
// none is.
func (w *wakeups) attempt(b *Backend) *subAttempt {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sub == nil {
		w.sub = &subAttempt{done: make(chan struct{})}
		go b.trySubscribe(w.sub)
	}
	return w.sub
}

// subscribeTimeout bounds one attempt to subscribe.
const subscribeTimeout = 10 * time.Second

// trySubscribe is attempt a: it subscribes, and listens if Redis confirms
// before the backend is closed.
func (b *Backend) trySubscribe(a *subAttempt) {
	defer close(a.done)
	ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
	defer cancel()
	ps := b.rdb.Subscribe(ctx, b.channel, b.forced)
	_, err := ps.Receive(ctx)
	w := &b.wake
	w.mu.Lock()
	w.sub = nil
	if err == nil && b.closed.Load() {
		err = goredis.ErrClosed // Close found no subscription to close: this one
	}
	if err == nil {
		w.ps = ps
		w.ready.Store(true)
	}
	w.mu.Unlock()
	if err != nil {
		_ = ps.Close()
		a.err = wrap("subscribe to wake-ups", "", err)
		return
	}
	go b.listen(ps)
}

// listenIdle is how long the subscription may stay silent before it is
// pinged; three silent periods in a row and the connection is replaced.
const listenIdle = 3 * time.Second

// listen reads the subscription and wakes the waits its messages name
// (and tells of force-releases, see NotifyForced), until the subscription
// is closed. A message names a lease ID: the wait
// gets it, and the grant it carries. go-redis reconnects a broken
// connection and subscribes again; it then reports the subscription, and
// every wait looks again, as messages may have been lost meanwhile. A
// connection that answers nothing, not even two pings, is replaced.
func (b *Backend) listen(ps *goredis.PubSub) {
	w := &b.wake
	ctx := context.Background()
	silent := 0
	for {
		m, err := ps.ReceiveTimeout(ctx, listenIdle)
		switch m := m.(type) {
		case *goredis.Message:
			if m.Channel == b.forced {
				b.notices.Heard(m.Payload)
			} else {
				id, _, _ := strings.Cut(m.Payload, " ")
				w.send(id, m.Payload)
			}
		case *goredis.Subscription:
			w.kick()
		}
		var nerr net.Error
		switch {
		case err == nil:
			silent = 0
		case errors.Is(err, goredis.ErrClosed):
			return
		case errors.As(err, &nerr) && nerr.Timeout():
			if silent++; silent >= 3 {
				b.relisten(ps)
				return
			}
			_ = ps.Ping(ctx)
		default:
			time.Sleep(100 * time.Millisecond) // go-redis reconnects on the next receive
		}
	}
}

// relisten replaces a subscription that stopped answering, retrying until
// it succeeds or the backend is closed, and makes every wait look again.
func (b *Backend) relisten(old *goredis.PubSub) {
	w := &b.wake
	w.mu.Lock()
	if w.ps == old {
		w.ps = nil
		w.ready.Store(false)
	}
	w.mu.Unlock()
	_ = old.Close()
	for !b.closed.Load() {
		if err := b.subscribe(context.Background()); err == nil {
			w.kick()
			return
		}
		select {
		case <-b.done:
		case <-time.After(b.cfg.Recheck):
		}
	}
}

// kick makes every wait look again.
func (w *wakeups) kick() {
	w.mu.Lock()
	for id := range w.ws {
		w.sendLocked(id, "")
	}
	w.mu.Unlock()
}

func (w *wakeups) send(id, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.ws[id]; ok || msg == "" {
		w.sendLocked(id, msg)
		return
	}
	// Kept for a wait about to register; old ones are swept, and a flood
	// (messages for waits that ended) is dropped.
	now := time.Now()
	if len(w.early) >= 64 {
		for k, e := range w.early {
			if now.Sub(e.at) > 10*time.Second || len(w.early) >= 4096 {
				delete(w.early, k)
			}
		}
	}
	w.early[id] = earlyGrant{msg, now}
}

// sendLocked wakes the wait of id without blocking: a pending wake-up
// already makes it look again.
func (w *wakeups) sendLocked(id, msg string) {
	if c, ok := w.ws[id]; ok {
		select {
		case c <- msg:
		default:
		}
	}
}

func (w *wakeups) subscribed() bool { return w.ready.Load() }

// register returns the wake-ups of the wait of id, with a grant message
// that came before.
func (w *wakeups) register(id string) chan string {
	c := make(chan string, 1)
	w.mu.Lock()
	w.ws[id] = c
	if e, ok := w.early[id]; ok {
		c <- e.msg
		delete(w.early, id)
	}
	w.mu.Unlock()
	return c
}

func (w *wakeups) unregister(id string) {
	w.mu.Lock()
	delete(w.ws, id)
	delete(w.early, id)
	w.mu.Unlock()
}

// close closes the subscription. An attempt still in progress closes its
// own when it ends (it sees the backend closed).
func (w *wakeups) close() {
	w.mu.Lock()
	ps := w.ps
	w.ps = nil
	w.ready.Store(false)
	w.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
	}
}
