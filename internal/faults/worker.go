package faults

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sema-dev/sema"
)

// WorkerConfig tells a worker process what to do.
type WorkerConfig struct {
	URL      string        // the backend
	Journal  string        // where to record
	Resource string        // the fenced resource's directory
	Names    []NameSpec    // what to lock
	TTL      time.Duration // of every lease
	Seed     uint64
	Start    int64         // Now() when the run began
	Epoch    time.Duration // names change every Epoch (see EpochName)
}

// NameSpec is a semaphore the workers share.
type NameSpec struct {
	Name  string
	Limit int64
}

// EpochName is the name workers use for spec in epoch n: every Epoch the
// workers move to fresh names, so the checker can cut a long history into
// independent pieces (one per name).
func EpochName(spec NameSpec, n int64) string { return fmt.Sprintf("%s@%d", spec.Name, n) }

// Margin is the lease's safety margin: the library's default, TTL/5.
func Margin(ttl time.Duration) time.Duration { return ttl / 5 }

// worker is one client process: it takes, holds, uses and releases leases
// through the public library, recording everything.
type worker struct {
	cfg      WorkerConfig
	c        *sema.Client
	j        *Journal
	res      *Resource
	rng      *rand.Rand
	ttl      int64
	margin   int64
	giveBack atomic.Int64 // "giving back an unused grant failed" warnings seen
}

// openBackend opens the backend, trying again while it is unavailable (a
// worker may start while its server restarts, as a supervised service
// would) until ctx ends.
func openBackend(ctx context.Context, url string) (sema.Backend, error) {
	for {
		b, err := sema.Open(ctx, url)
		if err == nil || !errors.Is(err, sema.ErrUnavailable) {
			return b, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// RunWorker runs a worker until SIGTERM (or SIGINT) and returns its exit
// status.
func RunWorker(cfg WorkerConfig) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	j, err := CreateJournal(cfg.Journal)
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: %v\n", err)
		return 2
	}
	defer j.Close()
	b, err := openBackend(ctx, cfg.URL)
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: %v\n", err)
		return 2
	}
	w := &worker{cfg: cfg, j: j, res: OpenResource(cfg.Resource),
		rng: rand.New(rand.NewPCG(cfg.Seed, uint64(os.Getpid()))),
		ttl: int64(cfg.TTL), margin: int64(Margin(cfg.TTL))}
	defer w.res.Close()
	log := slog.New(&warnCounter{Handler: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}), n: &w.giveBack})
	w.c = sema.New(b, sema.WithLogger(log), sema.WithReleaseTimeout(2*cfg.TTL))
	for ctx.Err() == nil {
		w.round(ctx)
	}
	// An abandoned lease may still be held: closing the client ends it,
	// at once on a backend that frees a closed handle's leases.
	j.Add(Rec{K: "exit", T: Now()})
	w.c.Close()
	return 0
}

// warnCounter counts the core's warnings that a cancelled acquire could
// not give back its grant: such an acquire may have left a lease behind.
type warnCounter struct {
	slog.Handler
	n *atomic.Int64
}

func (h *warnCounter) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "sema: giving back an unused grant failed" {
		h.n.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

func (w *worker) rand(lo, hi int64) int64 { return lo + w.rng.Int64N(hi-lo+1) }

func (w *worker) sleep(ctx context.Context, ns int64) {
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// round takes one lease (or fails to) and holds it.
func (w *worker) round(ctx context.Context) {
	spec := w.cfg.Names[w.rng.IntN(len(w.cfg.Names))]
	var epoch int64
	if w.cfg.Epoch > 0 {
		epoch = (Now() - w.cfg.Start) / int64(w.cfg.Epoch)
	}
	name := EpochName(spec, epoch)
	weight := w.rand(1, spec.Limit)
	keep := w.rng.IntN(3) == 0
	try := w.rng.IntN(2) == 0
	l := w.acquire(ctx, name, spec.Limit, weight, keep, try)
	if l == nil {
		w.sleep(ctx, w.rand(0, w.ttl/4))
		return
	}
	w.hold(ctx, l, spec.Limit, keep, !try)
}

func (w *worker) acquire(ctx context.Context, name string, limit, weight int64, keep, try bool) *sema.Lease {
	typ := OpAcquire
	if try {
		typ = OpTry
	}
	op := w.j.NextOp()
	opts := []sema.AcquireOption{sema.WithTTL(w.cfg.TTL), sema.WithWeight(weight)}
	if !keep {
		opts = append(opts, sema.WithoutKeepalive())
	}
	sem := w.c.Semaphore(name, limit)
	actx, cancel := context.WithTimeout(ctx, time.Duration(w.rand(w.ttl/4, w.ttl)))
	defer cancel()
	gb := w.giveBack.Load()
	t := Now()
	w.j.Add(Rec{K: "inv", Op: op, T: t, Type: typ, Name: name, Limit: limit, Weight: weight, Keep: keep, TTL: w.ttl, Margin: w.margin})
	var l *sema.Lease
	var err error
	if try {
		l, err = sem.TryAcquire(actx, opts...)
	} else {
		l, err = sem.Acquire(actx, opts...)
	}
	r := Rec{T: Now()}
	var held *sema.HeldError
	switch {
	case err == nil:
		r.Res, r.ID, r.Token, r.Deadline = ResOK, l.ID(), l.Token(), t+w.ttl-w.margin
	case errors.As(err, &held):
		r.Res = ResHeld
	case errors.Is(err, sema.ErrNotAcquired) && actx.Err() != nil && w.giveBack.Load() == gb:
		r.Res = ResCancel
	default:
		r.Res = ResUnknown
	}
	w.ret(op, r, err)
	return l
}

// ret journals the completion of operation op: r with its error.
func (w *worker) ret(op int64, r Rec, err error) {
	r.K, r.Op = "ret", op
	if err != nil {
		r.Err = err.Error()
	}
	w.j.Add(r)
}

// hold keeps the lease for a while: it writes to the resource at once and
// then every TTL/8, refreshes every TTL/3 (keepalive leases renew on their
// own as well), and releases it — or, now and then, abandons a lease
// without keepalive to let it expire.
func (w *worker) hold(ctx context.Context, l *sema.Lease, limit int64, keep, waited bool) {
	go func() {
		<-l.Done()
		w.j.Add(Rec{K: "done", T: Now(), ID: l.ID(), Err: context.Cause(l.Context()).Error()})
	}()
	if waited {
		// The deadline the worker can vouch for counts from the request's
		// invocation, which a wait makes early: a refresh moves it up.
		w.refresh(l)
	}
	check := Now()
	if l.Err() == nil {
		w.use(l, limit, check, false)
	}
	length := w.rand(0, w.ttl/2)
	if w.rng.IntN(8) == 0 {
		length = w.rand(w.ttl, 3*w.ttl) // long enough for several renewals
	}
	tick := w.ttl / 8
	end, nextRefresh, last := Now()+length, Now()+w.rand(w.ttl/8, w.ttl/3), Now()
	for ctx.Err() == nil {
		w.sleep(ctx, w.rand(tick/2, tick))
		now := Now()
		if now-last > tick+w.ttl/2 {
			// This process was stalled (SIGSTOP) between its last check
			// and now: write as a holder that had decided to write before
			// the pause would.
			w.use(l, limit, check, true)
		}
		last = now
		if l.Err() != nil || now >= end {
			break
		}
		if now >= nextRefresh {
			w.refresh(l)
			nextRefresh = now + w.ttl/3
		}
		if l.Err() == nil {
			check = Now()
			w.use(l, limit, check, false)
		}
	}
	if !keep && ctx.Err() == nil && w.rng.IntN(20) == 0 {
		return // abandoned: it expires on its own
	}
	w.release(l)
}

func (w *worker) use(l *sema.Lease, limit int64, check int64, stall bool) {
	ok, at, err := w.res.Write(l.Name(), limit, l.Token(), l.ID())
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: resource: %v\n", err)
		os.Exit(3)
	}
	w.j.Add(Rec{K: "use", T: at, Name: l.Name(), ID: l.ID(), Token: l.Token(), Check: check, OK: ok, Stall: stall})
}

func (w *worker) refresh(l *sema.Lease) {
	op := w.j.NextOp()
	t := Now()
	w.j.Add(Rec{K: "inv", Op: op, T: t, Type: OpRefresh, Name: l.Name(), ID: l.ID()})
	err := l.Refresh(context.Background())
	r := Rec{T: Now()}
	switch {
	case err == nil:
		r.Res, r.Deadline = ResOK, t+w.ttl-w.margin
	case errors.Is(err, sema.ErrLeaseLost):
		r.Res = ResLost
	default:
		r.Res = ResUnknown
	}
	w.ret(op, r, err)
}

func (w *worker) release(l *sema.Lease) {
	op := w.j.NextOp()
	ended := l.Err() != nil
	w.j.Add(Rec{K: "inv", Op: op, T: Now(), Type: OpRelease, Name: l.Name(), ID: l.ID()})
	err := l.Release(context.Background())
	r := Rec{T: Now()}
	switch {
	case err == nil:
		r.Res = ResOK
	case ended:
		r.Res = ResEnded
	case errors.Is(err, sema.ErrLeaseLost):
		r.Res = ResNotHeld
	default:
		r.Res = ResUnknown
	}
	w.ret(op, r, err)
}
