package server

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sema-dev/sema"
)

// Defaults of Config.
const (
	DefaultHeartbeat = 5 * time.Second
	DefaultMaxWait   = 10 * time.Minute
	// DefaultMaxWaiters bounds the acquires waiting at once, overall: a
	// waiter costs about 1.5 KB, so about 400 MB at most.
	DefaultMaxWaiters = 1 << 18
	// DefaultMaxWaitersPerPrincipal bounds the acquires one principal (a
	// token, or an address without tokens) may have waiting at once.
	DefaultMaxWaitersPerPrincipal = 1 << 16
	// DefaultMaxConnsPerPrincipal bounds the sema-mux connections one
	// principal may hold open (a Go client process needs one).
	DefaultMaxConnsPerPrincipal = 64
)

// Config configures a Server.
type Config struct {
	// Backend is the store the server serves (required). With the
	// embedded store (package store), leases are bound to the credential
	// that acquired them durably and the store's own gauges are exported;
	// any other backend is served through the sema.Backend interfaces.
	Backend sema.Backend
	// Tokens are the accepted credentials. Empty: every request is an
	// admin (the caller must only listen on loopback then; see
	// NeedsAuth).
	Tokens []Token
	// Heartbeat is how long a long-poll waits before it commits a 200 and
	// starts writing one space every Heartbeat. Default DefaultHeartbeat.
	Heartbeat time.Duration
	// MaxWait caps a request's wait_ms. Default DefaultMaxWait.
	MaxWait time.Duration
	// Logger receives errors and audit lines (force-release). Default
	// slog.Default().
	Logger *slog.Logger
	// Registry receives the server's metrics. Default: a new private
	// registry, served at /metrics.
	Registry *prometheus.Registry
	// MaxWaiters bounds the acquires waiting at once (long polls and
	// sema-mux waits), overall; one more is refused with the code
	// too_many_waiters (HTTP 429). Default DefaultMaxWaiters.
	MaxWaiters int
	// MaxWaitersPerPrincipal is MaxWaiters for one principal: a token, or
	// the client's IP address when the server has no tokens. Default
	// DefaultMaxWaitersPerPrincipal.
	MaxWaitersPerPrincipal int
	// MaxConnsPerPrincipal bounds the sema-mux connections of one
	// principal; one more upgrade is refused with the code
	// too_many_connections (HTTP 429). Default DefaultMaxConnsPerPrincipal.
	MaxConnsPerPrincipal int
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	switch {
	case c.Backend == nil:
		return fmt.Errorf("server: %w: Config.Backend is nil", sema.ErrInvalidArgument)
	case c.Heartbeat < 0 || c.Heartbeat > time.Hour:
		return fmt.Errorf("server: %w: heartbeat %v out of range (0, 1h]", sema.ErrInvalidArgument, c.Heartbeat)
	case c.MaxWait < 0 || c.MaxWait > 24*time.Hour:
		return fmt.Errorf("server: %w: max wait %v out of range (0, 24h]", sema.ErrInvalidArgument, c.MaxWait)
	case c.MaxWaiters < 0 || c.MaxWaitersPerPrincipal < 0 || c.MaxConnsPerPrincipal < 0:
		return fmt.Errorf("server: %w: negative bound on waiters or connections", sema.ErrInvalidArgument)
	}
	seen := map[string]bool{}
	for _, t := range c.Tokens {
		if err := t.validate(); err != nil {
			return err
		}
		if seen[t.Secret] {
			return fmt.Errorf("server: %w: a token is listed twice", sema.ErrInvalidArgument)
		}
		seen[t.Secret] = true
	}
	return nil
}

func (c *Config) withDefaults() Config {
	d := *c
	if d.Heartbeat == 0 {
		d.Heartbeat = DefaultHeartbeat
	}
	if d.MaxWait == 0 {
		d.MaxWait = DefaultMaxWait
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.MaxWaiters == 0 {
		d.MaxWaiters = DefaultMaxWaiters
	}
	if d.MaxWaitersPerPrincipal == 0 {
		d.MaxWaitersPerPrincipal = min(DefaultMaxWaitersPerPrincipal, d.MaxWaiters)
	}
	if d.MaxConnsPerPrincipal == 0 {
		d.MaxConnsPerPrincipal = DefaultMaxConnsPerPrincipal
	}
	if d.Registry == nil {
		d.Registry = prometheus.NewRegistry()
	}
	return d
}
