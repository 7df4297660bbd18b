package store

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sema-dev/sema"
)

// Defaults of Config.
const (
	DefaultSnapshotBytes = 64 << 20
	DefaultFlushDelay    = 10 * time.Millisecond
)

// Config configures a Store.
type Config struct {
	// Dir is the data directory (required). It is created with mode 0700
	// if missing. One process at a time may open it.
	Dir string
	// SnapshotBytes: once the log has grown by this many bytes since the
	// last snapshot (and by at least twice the size of that snapshot), the
	// store writes a new snapshot and deletes the older log. Default
	// DefaultSnapshotBytes.
	SnapshotBytes int64
	// FlushDelay bounds how long a record nobody waits for (a release, an
	// expiry) stays in memory before it is written with the next batch.
	// Default DefaultFlushDelay.
	FlushDelay time.Duration
	// Logger receives recovery and error reports. Default slog.Default().
	Logger *slog.Logger
	// AcceptDataLoss opens a data directory whose log ends below the last
	// token reservation it made (see reserve.go): storage lost records,
	// maybe grants. Without it Open refuses such a directory. With it the
	// store starts with what the log still holds, and tokens continue
	// above the reservation, so they never repeat.
	AcceptDataLoss bool
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	switch {
	case c.Dir == "":
		return fmt.Errorf("store: %w: Config.Dir is empty", sema.ErrInvalidArgument)
	case c.SnapshotBytes < 0:
		return fmt.Errorf("store: %w: negative SnapshotBytes", sema.ErrInvalidArgument)
	case c.FlushDelay < 0 || c.FlushDelay > time.Second:
		return fmt.Errorf("store: %w: FlushDelay %v out of range [0, 1s]", sema.ErrInvalidArgument, c.FlushDelay)
	}
	return nil
}

func (c *Config) withDefaults() Config {
	d := *c
	if d.SnapshotBytes == 0 {
		d.SnapshotBytes = DefaultSnapshotBytes
	}
	if d.FlushDelay == 0 {
		d.FlushDelay = DefaultFlushDelay
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	return d
}

// Reason says why a lease ended.
type Reason byte

// Reasons a lease ends.
const (
	ReasonRelease  Reason = Reason(endRelease)  // its holder released it
	ReasonExpire   Reason = Reason(endExpire)   // its TTL passed without renewal
	ReasonForce    Reason = Reason(endForce)    // an admin force-released it
	ReasonGiveBack Reason = Reason(endGiveBack) // granted, but the requester was gone
)

func (r Reason) String() string {
	switch r {
	case ReasonRelease:
		return "release"
	case ReasonExpire:
		return "expire"
	case ReasonForce:
		return "force_release"
	case ReasonGiveBack:
		return "give_back"
	}
	return fmt.Sprintf("reason(%d)", byte(r))
}

// Caller is who makes a request. A lease is bound to the principal that
// acquired it: only that principal or an admin may renew or release it.
type Caller struct {
	Principal string // a stable fingerprint of the credential, ≤ 64 bytes; "" for none
	Admin     bool
}

func (c Caller) may(l *lease) bool { return c.Admin || c.Principal == l.principal }

// ErrForbidden is returned when a caller acts on a lease bound to another
// principal.
var ErrForbidden = errors.New("store: the lease belongs to another client")

// Stats are running totals and current gauges, read without locking.
type Stats struct {
	Grants        uint64 // leases granted since the store opened
	Expirations   uint64 // leases that ended by TTL
	ForceReleases uint64 // leases ended by an admin
	Holders       int64  // live leases now
	Waiters       int64  // queued acquires now
	Handoffs      uint64 // grants to queued waiters
	EarlyHandoffs uint64 // of which answered before their record was on disk (fast.go)
	Records       uint64 // log records appended
	Syncs         uint64 // log batches written and fsynced (group commits)
	SyncTime      time.Duration
}
