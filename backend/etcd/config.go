package etcd

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/sema-dev/sema"
)

// Defaults for [Config].
const (
	DefaultPrefix         = "sema"
	DefaultDialTimeout    = 5 * time.Second
	DefaultRequestTimeout = 5 * time.Second
	DefaultWaiterTTL      = 15 * time.Second
	DefaultRecheck        = 2 * time.Second
)

// Config tells a [Backend] where etcd is and how to use it. Endpoints is
// required; zero fields mean the defaults below.
type Config struct {
	// Endpoints are the etcd members' client addresses, host:port. Required.
	Endpoints []string

	// Prefix is the key prefix under which all of sema's keys live, without
	// a trailing slash. Default "sema".
	Prefix string

	// Username and Password authenticate to an etcd with auth enabled.
	// Default: none.
	Username, Password string

	// TLS, if set, is used to connect (server verification, client
	// certificates). Default: plain TCP.
	TLS *tls.Config

	// DialTimeout bounds connecting (and authenticating) at Open: with no
	// reachable endpoint, Open fails after it. Default 5s; range [100ms, 1m].
	DialTimeout time.Duration

	// RequestTimeout bounds each call to etcd, so that an unreachable
	// cluster is an error, never a hang. Default 5s; range [100ms, 1m].
	RequestTimeout time.Duration

	// WaiterTTL is the TTL of a waiter's etcd lease while it is queued
	// (kept alive by the waiting process): a waiter that dies leaves the
	// queue within it. A request with a longer TTL waits under a lease of
	// WaiterTTL and moves to a lease of its own TTL when granted. Default
	// 15s; range [1s, 1h].
	WaiterTTL time.Duration

	// Recheck bounds how long a waiter goes without re-reading its queue
	// when no watch event arrives: only a guard against a lost event.
	// Default 2s; range [10ms, 1m].
	Recheck time.Duration

	// Logger receives warnings (a waiter re-queued after losing its etcd
	// lease). Default slog.Default().
	Logger *slog.Logger
}

// withDefaults returns a copy of c with zero fields set to their defaults.
func (c *Config) withDefaults() Config {
	out := *c
	if out.Prefix == "" {
		out.Prefix = DefaultPrefix
	}
	if out.DialTimeout == 0 {
		out.DialTimeout = DefaultDialTimeout
	}
	if out.RequestTimeout == 0 {
		out.RequestTimeout = DefaultRequestTimeout
	}
	if out.WaiterTTL == 0 {
		out.WaiterTTL = DefaultWaiterTTL
	}
	if out.Recheck == 0 {
		out.Recheck = DefaultRecheck
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	return out
}

// Validate reports a missing or out-of-range field, wrapping
// [sema.ErrInvalidArgument]. Zero fields other than Endpoints are valid:
// they mean the default.
func (c *Config) Validate() error {
	d := c.withDefaults()
	if len(d.Endpoints) == 0 {
		return fmt.Errorf("etcd: %w: no endpoints", sema.ErrInvalidArgument)
	}
	for _, ep := range d.Endpoints {
		if _, port, err := net.SplitHostPort(ep); err != nil || port == "" || strings.ContainsAny(ep, "/?#@ ") {
			return fmt.Errorf("etcd: %w: endpoint %q is not host:port", sema.ErrInvalidArgument, ep)
		}
	}
	if err := checkPrefix(d.Prefix); err != nil {
		return err
	}
	if d.Password != "" && d.Username == "" {
		return fmt.Errorf("etcd: %w: a password without a user name", sema.ErrInvalidArgument)
	}
	for _, f := range []struct {
		name     string
		v        time.Duration
		min, max time.Duration
	}{
		{"DialTimeout", d.DialTimeout, 100 * time.Millisecond, time.Minute},
		{"RequestTimeout", d.RequestTimeout, 100 * time.Millisecond, time.Minute},
		{"WaiterTTL", d.WaiterTTL, time.Second, time.Hour},
		{"Recheck", d.Recheck, 10 * time.Millisecond, time.Minute},
	} {
		if f.v < f.min || f.v > f.max {
			return fmt.Errorf("etcd: %w: %s %v out of range [%v, %v]", sema.ErrInvalidArgument, f.name, f.v, f.min, f.max)
		}
	}
	return nil
}

// checkPrefix accepts 1–128 bytes of printable ASCII, not starting or
// ending with '/'.
func checkPrefix(p string) error {
	if p == "" || len(p) > 128 || p[0] == '/' || p[len(p)-1] == '/' {
		return fmt.Errorf("etcd: %w: key prefix %q must be 1-128 bytes, not starting or ending with /", sema.ErrInvalidArgument, p)
	}
	for i := 0; i < len(p); i++ {
		if p[i] <= ' ' || p[i] >= 0x7f {
			return fmt.Errorf("etcd: %w: key prefix %q has byte %#x; only printable ASCII", sema.ErrInvalidArgument, p, p[i])
		}
	}
	return nil
}
