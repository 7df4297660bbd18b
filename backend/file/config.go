package file

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/sema-dev/sema"
)

// Defaults for [Config].
const (
	DefaultRecheck   = time.Second
	DefaultPoll      = 20 * time.Millisecond
	DefaultIdleClose = 2 * time.Second
)

// Config tunes a [Backend]. The zero value (or a nil *Config) means the
// defaults below.
type Config struct {
	// Recheck bounds how long a waiter goes without re-reading its name's
	// state when no event arrives. Events (an in-process hand-off, a ring
	// of its doorbell, a death seen by inotify, a timer at the earliest
	// lease expiry) do the real work; this is only the guard against a lost
	// event. Default 1s; range [10ms, 1m].
	Recheck time.Duration

	// Poll is the re-read interval used instead of events when a waiter's
	// doorbell cannot be bound, or a watch on a name's file cannot be added
	// (for example fs.inotify.max_user_watches is exhausted). Default 20ms;
	// range [1ms, Recheck].
	Poll time.Duration

	// IdleClose is how long a name's file stays open after this backend's
	// last lease and waiter on it ended. An open file keeps this process's
	// liveness lock on the name, which a repair of a damaged state file
	// waits for. Default 2s; range [10ms, 1h]. The backend looks for idle
	// files every IdleClose/2, at least every second.
	IdleClose time.Duration

	// Sync calls fdatasync(2) after every state write. Without it a state
	// write survives any process crash but may be lost by a machine crash;
	// fencing tokens never go back either way (see the package doc).
	// Default false.
	Sync bool

	// Logger receives warnings: repaired state files, unreadable files met
	// by List. Default slog.Default().
	Logger *slog.Logger
}

// withDefaults returns a copy of c (which may be nil) with zero fields set
// to their defaults.
func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Recheck == 0 {
		out.Recheck = DefaultRecheck
	}
	if out.Poll == 0 {
		out.Poll = min(DefaultPoll, out.Recheck)
	}
	if out.IdleClose == 0 {
		out.IdleClose = DefaultIdleClose
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	return out
}

// Validate reports a field out of range, wrapping [sema.ErrInvalidArgument].
// Zero fields are valid: they mean the default.
func (c *Config) Validate() error {
	if c == nil {
		return nil
	}
	d := c.withDefaults()
	switch {
	case d.Recheck < 10*time.Millisecond || d.Recheck > time.Minute:
		return fmt.Errorf("file: %w: Recheck %v out of range [10ms, 1m]", sema.ErrInvalidArgument, c.Recheck)
	case d.Poll < time.Millisecond || d.Poll > d.Recheck:
		return fmt.Errorf("file: %w: Poll %v out of range [1ms, Recheck %v]", sema.ErrInvalidArgument, c.Poll, d.Recheck)
	case d.IdleClose < 10*time.Millisecond || d.IdleClose > time.Hour:
		return fmt.Errorf("file: %w: IdleClose %v out of range [10ms, 1h]", sema.ErrInvalidArgument, c.IdleClose)
	}
	return nil
}
