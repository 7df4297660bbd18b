package postgres

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sema-dev/sema"
)

// Defaults for [Config].
const (
	DefaultSchema      = "public"
	DefaultTablePrefix = "sema_"
	DefaultRecheck     = time.Second
	DefaultWaiterTTL   = 5 * time.Second
	DefaultSweep       = 5 * time.Minute
)

// Config tunes a [Backend]. Only URL is required.
type Config struct {
	// URL is the connection string: a postgres:// or postgresql:// URL, or
	// key=value settings, as pgx reads them (pool settings such as
	// pool_max_conns included). It may point at a transaction-mode pooler
	// (PgBouncer): every step is one statement in one transaction.
	URL string

	// ListenURL is the connection the backend LISTENs on for hand-offs. A
	// LISTEN needs a session of its own, so behind a transaction-mode
	// pooler it must point at the database directly (a session-mode pool
	// also works). Default: URL. A listen connection that does not receive
	// notifications is detected when it is opened, and waiting then fails
	// with an error saying so.
	//
	// It also decides how statements are sent: with a ListenURL of its own
	// (URL may be a transaction-mode pooler), as unnamed statements, each
	// parsed by the database; without, as prepared statements. pgx's URL
	// parameter default_query_exec_mode overrides this.
	ListenURL string

	// Schema holds the tables and functions, created on first use if
	// missing. Default "public". Letters, digits and underscores only.
	Schema string

	// TablePrefix starts the name of every table, sequence, type and
	// function of this backend, so that several installations can share a
	// schema. Default "sema_". Letters, digits and underscores only.
	TablePrefix string

	// Recheck bounds how long a waiter goes without looking at its request
	// in the database when no notification comes: the guard against a lost
	// notification. Default 1s; range [10ms, 1m].
	Recheck time.Duration

	// WaiterTTL is the lease of a queued request: a waiter whose process
	// died leaves the queue that long after its last check. It also bounds
	// how long a waiting Acquire rides out an unreachable database. Default
	// 5s; range [3×Recheck, 10m].
	WaiterTTL time.Duration

	// Sweep is how often the backend deletes the rows of names nobody holds
	// or waits for, with their expired leases and waiters (steps on a name
	// clean up after it; the sweep is for names nobody uses any more).
	// Default 5m; range [1s, 24h].
	Sweep time.Duration

	// Logger receives warnings (a lost listen connection, a failed sweep).
	// Default slog.Default().
	Logger *slog.Logger
}

// withDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.ListenURL == "" {
		c.ListenURL = c.URL
	}
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	if c.TablePrefix == "" {
		c.TablePrefix = DefaultTablePrefix
	}
	if c.Recheck == 0 {
		c.Recheck = DefaultRecheck
	}
	if c.WaiterTTL == 0 {
		c.WaiterTTL = max(DefaultWaiterTTL, 3*c.Recheck)
	}
	if c.Sweep == 0 {
		c.Sweep = DefaultSweep
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// longestObject is the longest name the backend gives an object after the
// prefix ("force_release"); PostgreSQL identifiers have at most 63 bytes.
const longestObject = len("force_release")

// Validate reports a field out of range, wrapping [sema.ErrInvalidArgument].
// Zero fields are valid: they mean the default.
func (c Config) Validate() error {
	d := c.withDefaults()
	switch {
	case c.URL == "":
		return fmt.Errorf("postgres: %w: no URL", sema.ErrInvalidArgument)
	case !plainIdent(d.Schema, true) || len(d.Schema) > 63:
		return fmt.Errorf("postgres: %w: schema %q: use 1-63 letters, digits and underscores, not starting with a digit",
			sema.ErrInvalidArgument, c.Schema)
	case !plainIdent(d.TablePrefix, false) || len(d.TablePrefix)+longestObject > 63:
		return fmt.Errorf("postgres: %w: table prefix %q: use at most %d letters, digits and underscores",
			sema.ErrInvalidArgument, c.TablePrefix, 63-longestObject)
	case d.Recheck < 10*time.Millisecond || d.Recheck > time.Minute:
		return fmt.Errorf("postgres: %w: Recheck %v out of range [10ms, 1m]", sema.ErrInvalidArgument, c.Recheck)
	case d.WaiterTTL < 3*d.Recheck || d.WaiterTTL > 10*time.Minute:
		return fmt.Errorf("postgres: %w: WaiterTTL %v out of range [3×Recheck (%v), 10m]",
			sema.ErrInvalidArgument, c.WaiterTTL, 3*d.Recheck)
	case d.Sweep < time.Second || d.Sweep > 24*time.Hour:
		return fmt.Errorf("postgres: %w: Sweep %v out of range [1s, 24h]", sema.ErrInvalidArgument, c.Sweep)
	}
	return nil
}

// plainIdent reports whether s is letters, digits and underscores, and (if
// first) starts with a letter or underscore. Identifiers are quoted anyway;
// this keeps them readable and out of the way of the SQL around them.
func plainIdent(s string, first bool) bool {
	if first && (s == "" || s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// hostName reports whether s is a plausible DNS name: letters, digits,
// dots, hyphens and underscores.
func hostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// portNumber reports whether s is a TCP port, 1-65535.
func portNumber(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 1 && n <= 65535 && strconv.Itoa(n) == s
}

// URL query parameters read by ParseURL; the others go to pgx.
const (
	paramSchema = "sema_schema" // Config.Schema
	paramPrefix = "sema_prefix" // Config.TablePrefix
	paramListen = "sema_listen" // host[:port] of Config.ListenURL
)

// ParseURL reads a postgres:// or postgresql:// URL into a Config. Three
// query parameters are sema's own: sema_schema and sema_prefix set Schema and
// TablePrefix, and sema_listen=host:port makes ListenURL the same URL on
// another host and port (the database itself, when the URL points at a
// transaction-mode pooler). The other parameters are pgx's (sslmode,
// pool_max_conns, …). Errors wrap [sema.ErrInvalidArgument] and never quote
// the password.
func ParseURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Config{}, fmt.Errorf("postgres: %w: not a valid URL", sema.ErrInvalidArgument)
	}
	if s := strings.ToLower(u.Scheme); s != "postgres" && s != "postgresql" {
		return Config{}, fmt.Errorf("postgres: %w: scheme %q, want postgres:// or postgresql://", sema.ErrInvalidArgument, u.Scheme)
	}
	if u.Opaque != "" || u.Fragment != "" {
		return Config{}, fmt.Errorf("postgres: %w: %s: write postgres://user@host:port/database", sema.ErrInvalidArgument, u.Redacted())
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Config{}, fmt.Errorf("postgres: %w: %s: bad query string", sema.ErrInvalidArgument, u.Redacted())
	}
	var cfg Config
	listen := ""
	for k, vs := range q {
		if !strings.HasPrefix(k, "sema_") {
			continue
		}
		if len(vs) != 1 || vs[0] == "" {
			return Config{}, fmt.Errorf("postgres: %w: %s must be given once, not empty", sema.ErrInvalidArgument, k)
		}
		switch k {
		case paramSchema:
			cfg.Schema = vs[0]
		case paramPrefix:
			cfg.TablePrefix = vs[0]
		case paramListen:
			listen = vs[0]
		default:
			return Config{}, fmt.Errorf("postgres: %w: unknown parameter %s (known: %s, %s, %s)",
				sema.ErrInvalidArgument, k, paramSchema, paramPrefix, paramListen)
		}
		q.Del(k)
	}
	u.RawQuery = q.Encode()
	cfg.URL = u.String()
	if listen != "" {
		host, port, err := net.SplitHostPort(listen)
		if err != nil {
			host, port = listen, ""
		}
		if !hostName(host) && net.ParseIP(host) == nil || port != "" && !portNumber(port) {
			return Config{}, fmt.Errorf("postgres: %w: %s=%q: want host or host:port", sema.ErrInvalidArgument, paramListen, listen)
		}
		lu := *u
		lu.Host = net.JoinHostPort(host, port)
		if port == "" {
			lu.Host = host
			if strings.Contains(host, ":") {
				lu.Host = "[" + host + "]"
			}
		}
		cfg.ListenURL = lu.String()
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}
