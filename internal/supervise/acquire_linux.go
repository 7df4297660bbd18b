package supervise

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/human"
)

var (
	errInterrupted = errors.New("interrupted")
	errFrontGone   = errors.New("sema run was killed")
	errWaitExpired = errors.New("wait expired")
)

// acquire takes the lease, waiting as cfg says. It gives up when a signal
// arrives (code 128+N) or the front dies. On failure it has reported why and
// returns the exit code.
func (s *supervisor) acquire(c *sema.Client) (*sema.Lease, int) {
	cfg := s.cfg
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	if cfg.Wait > 0 {
		var cancelT context.CancelFunc
		ctx, cancelT = context.WithTimeoutCause(ctx, cfg.Wait, errWaitExpired)
		defer cancelT()
	}
	// Watch for signals and the front's death while waiting.
	var sig syscall.Signal
	stop, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case b := <-s.cmds:
				if b == ctlCont || b == 0 || b > 64 {
					continue
				}
				sig = syscall.Signal(b)
				cancel(errInterrupted)
				return
			case sg := <-s.sigs:
				if sg == syscall.SIGPIPE {
					continue
				}
				sig = sg.(syscall.Signal)
				cancel(errInterrupted)
				return
			case <-s.frontGone:
				cancel(errFrontGone)
				return
			case <-stop:
				return
			}
		}
	}()
	sem := c.Semaphore(cfg.Name, cfg.Limit)
	opts := []sema.AcquireOption{
		sema.WithTTL(cfg.TTL), sema.WithWeight(cfg.Weight), sema.WithOwner(s.owner()),
		sema.WithSafetyMargin(cfg.Margin),
	}
	if cfg.MaxHold > 0 {
		opts = append(opts, sema.WithMaxHold(cfg.MaxHold))
	}
	var l *sema.Lease
	var err error
	if cfg.Wait == 0 {
		l, err = sem.TryAcquire(ctx, opts...)
	} else {
		noted := s.noteWaiting(c)
		l, err = sem.Acquire(ctx, opts...)
		if waited := noted(); waited > 0 && err == nil {
			s.out.msg("acquired %q after %s", cfg.Name, waited.Round(100*time.Millisecond))
		}
	}
	close(stop)
	<-watched

	cause := context.Cause(ctx)
	if err == nil && (errors.Is(cause, errInterrupted) || errors.Is(cause, errFrontGone)) {
		_ = l.Release(context.Background()) // granted just as we were told to stop
		err = errors.Join(sema.ErrNotAcquired, cause)
	}
	switch {
	case err == nil:
		return l, 0
	case errors.Is(cause, errInterrupted):
		s.out.msg("interrupted by %v while waiting for %q", sig, cfg.Name)
		return nil, 128 + int(sig)
	case errors.Is(cause, errFrontGone):
		return nil, cfg.NotAcquiredExit
	case errors.Is(err, sema.ErrNotAcquired):
		s.out.msg("%s", s.heldMessage(c, err, errors.Is(cause, errWaitExpired)))
		return nil, cfg.NotAcquiredExit
	}
	s.out.msg("%s", err)
	return nil, ExitCode(err)
}

// heldMessage explains who holds the name, for a failed acquire.
func (s *supervisor) heldMessage(c *sema.Client, err error, expired bool) string {
	var holders []sema.Holder
	var limit int64
	var he *sema.HeldError
	if errors.As(err, &he) {
		holders, limit = he.Holders, he.Limit
	} else {
		// Who holds it is worth a short look, not a wait on a backend
		// that does not answer.
		dctx, cancel := context.WithTimeout(context.Background(), waitNote)
		if st, derr := c.Describe(dctx, s.cfg.Name); derr == nil {
			holders, limit = st.Holders, st.Limit
		}
		cancel()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%q not acquired", s.cfg.Name)
	if expired {
		fmt.Fprintf(&b, " within %v", s.cfg.Wait)
	}
	if len(holders) > 0 {
		b.WriteString(": ")
		writeHolders(&b, holders, limit)
	}
	return b.String()
}

// writeHolders describes who holds a name: "1/1 held by OWNER (token N,
// for AGE)", naming three holders at most.
func writeHolders(b *strings.Builder, holders []sema.Holder, limit int64) {
	var used int64
	for _, h := range holders {
		used += h.Weight
	}
	fmt.Fprintf(b, "%d/%d held by ", used, limit)
	for i, h := range holders {
		if i == 3 {
			fmt.Fprintf(b, ", and %d more", len(holders)-3)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(b, "%s (token %d, for %s)", h.Owner, h.Token, human.Age(h.AcquiredAt))
	}
}

// noteWaiting says, if the acquire is still waiting after waitNote, whom it
// waits for (the holders, when the backend can tell). The returned
// function stops the note and returns how long the acquire waited if the
// note was said, else 0.
func (s *supervisor) noteWaiting(c *sema.Client) (stop func() time.Duration) {
	if s.cfg.Quiet {
		return func() time.Duration { return 0 }
	}
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	said := make(chan bool, 1)
	go func() {
		t := time.NewTimer(waitNote)
		defer t.Stop()
		select {
		case <-ctx.Done():
			said <- false
			return
		case <-t.C:
		}
		var b strings.Builder
		fmt.Fprintf(&b, "waiting for %q", s.cfg.Name)
		dctx, dcancel := context.WithTimeout(ctx, waitNote)
		st, err := c.Describe(dctx, s.cfg.Name)
		dcancel()
		switch {
		case ctx.Err() != nil:
			said <- false // acquired meanwhile: nothing to say
			return
		case err == nil && len(st.Holders) > 0:
			b.WriteString(": ")
			writeHolders(&b, st.Holders, st.Limit)
			if len(st.Waiters) > 1 {
				fmt.Fprintf(&b, "; %d waiting", len(st.Waiters))
			}
		}
		s.out.msg("%s", b.String())
		said <- true
	}()
	return func() time.Duration {
		cancel()
		if <-said {
			return time.Since(start)
		}
		return 0
	}
}

// waitNote is how long sema run waits before saying whom it waits for.
const waitNote = time.Second

// owner is the --owner label, else user@host:pid PROG.
func (s *supervisor) owner() string {
	if s.cfg.Owner != "" {
		return s.cfg.Owner
	}
	host, _ := os.Hostname()
	o := fmt.Sprintf("%s@%s:%d", s.cfg.User, host, os.Getpid())
	if len(s.cfg.Cmd) > 0 {
		o += " " + filepath.Base(s.cfg.Cmd[0])
	}
	return human.Label(o)
}

// jobEnv is the job's environment: ours, with the lease's variables.
func jobEnv(base []string, l *sema.Lease) []string {
	set := map[string]string{
		"SEMA_NAME":     l.Name(),
		"SEMA_TOKEN":    strconv.FormatUint(l.Token(), 10),
		"SEMA_LEASE_ID": l.ID(),
		"SEMA_LIMIT":    strconv.FormatInt(l.Limit(), 10),
		"SEMA_WEIGHT":   strconv.FormatInt(l.Weight(), 10),
	}
	env := make([]string, 0, len(base)+len(set))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ours := set[k]; !ours {
			env = append(env, kv)
		}
	}
	for _, k := range []string{"SEMA_NAME", "SEMA_TOKEN", "SEMA_LEASE_ID", "SEMA_LIMIT", "SEMA_WEIGHT"} {
		env = append(env, k+"="+set[k])
	}
	return env
}
