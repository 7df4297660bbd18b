package redis

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sema-dev/sema"
)

// Defaults for [Config].
const (
	DefaultPrefix      = "sema:"
	DefaultRecheck     = time.Second
	DefaultWaitTimeout = time.Second
)

// Config tunes a [Backend]. Exactly one of Single and Cluster is set;
// [ParseURL] makes one from a URL.
type Config struct {
	// Single are go-redis's options for one Redis server (a primary).
	Single *goredis.Options
	// Cluster are go-redis's options for a Redis Cluster.
	Cluster *goredis.ClusterOptions

	// Prefix starts every key the backend writes, and the channels it
	// listens on. 1–64 bytes of letters, digits and -._~/:@+,= (no braces:
	// the part in braces is the name's cluster hash tag). Default "sema:".
	Prefix string

	// Recheck bounds how long a waiter goes without asking Redis about its
	// place: the guard against a lost wake-up message. It is also how
	// often a waiter renews its own lease in the queue, which lasts three
	// times as long: a waiter that dies leaves the queue within 3×Recheck.
	// Default 1s; range [10ms, 1m].
	Recheck time.Duration

	// WaitReplicas, if above zero, makes every grant and renewal wait until
	// that many replicas have acknowledged it (Redis WAIT) before it is
	// answered: a grant that was not copied in time is given back and the
	// caller gets an error wrapping sema.ErrUnavailable. Default 0: grants
	// are answered at once and may be lost by a failover.
	WaitReplicas int

	// WaitTimeout bounds each WAIT. Default 1s; range [1ms, 1m]; below the
	// connection's read timeout.
	WaitTimeout time.Duration

	// Logger receives warnings. Default slog.Default().
	Logger *slog.Logger
}

// withDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Recheck == 0 {
		c.Recheck = DefaultRecheck
	}
	if c.WaitTimeout == 0 {
		c.WaitTimeout = DefaultWaitTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports a field out of range, wrapping [sema.ErrInvalidArgument].
// Zero fields are valid: they mean the default.
func (c Config) Validate() error {
	d := c.withDefaults()
	switch {
	case (c.Single == nil) == (c.Cluster == nil):
		return fmt.Errorf("%w: redis: set exactly one of Config.Single and Config.Cluster", sema.ErrInvalidArgument)
	case d.Recheck < 10*time.Millisecond || d.Recheck > time.Minute:
		return fmt.Errorf("%w: redis: Recheck %v out of range [10ms, 1m]", sema.ErrInvalidArgument, c.Recheck)
	case c.WaitReplicas < 0 || c.WaitReplicas > 100:
		return fmt.Errorf("%w: redis: WaitReplicas %d out of range [0, 100]", sema.ErrInvalidArgument, c.WaitReplicas)
	case d.WaitTimeout < time.Millisecond || d.WaitTimeout > time.Minute:
		return fmt.Errorf("%w: redis: WaitTimeout %v out of range [1ms, 1m]", sema.ErrInvalidArgument, c.WaitTimeout)
	}
	if rt := d.readTimeout(); c.WaitReplicas > 0 && rt > 0 && d.WaitTimeout >= rt {
		return fmt.Errorf("%w: redis: WaitTimeout %v must be below the read timeout %v", sema.ErrInvalidArgument, d.WaitTimeout, rt)
	}
	if err := c.validAddrs(); err != nil {
		return err
	}
	return validPrefix(d.Prefix)
}

// addrs names the servers, for messages.
func (c Config) addrs() string {
	if c.Cluster != nil {
		return strings.Join(c.Cluster.Addrs, ",")
	}
	return c.Single.Addr
}

// tls reports whether the connections use TLS.
func (c Config) tls() bool {
	if c.Cluster != nil {
		return c.Cluster.TLSConfig != nil
	}
	return c.Single.TLSConfig != nil
}

// validAddrs checks the TCP addresses of the servers: a port out of range
// is a mistake in the URL, not a server to retry dialing.
func (c Config) validAddrs() error {
	var addrs []string
	switch {
	case c.Single != nil && (c.Single.Network == "" || c.Single.Network == "tcp"):
		addrs = []string{c.Single.Addr}
	case c.Cluster != nil:
		addrs = c.Cluster.Addrs
	}
	for _, a := range addrs {
		if a == "" {
			continue // go-redis's default, localhost:6379
		}
		_, port, err := net.SplitHostPort(a)
		if err != nil {
			return fmt.Errorf("%w: redis: address %q: %v", sema.ErrInvalidArgument, a, err)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%w: redis: address %q: port must be between 1 and 65535", sema.ErrInvalidArgument, a)
		}
	}
	return nil
}

// readTimeout is the connections' read timeout as go-redis will use it
// (3s when unset; none when negative).
func (c Config) readTimeout() time.Duration {
	rt := time.Duration(0)
	if c.Single != nil {
		rt = c.Single.ReadTimeout
	} else if c.Cluster != nil {
		rt = c.Cluster.ReadTimeout
	}
	switch {
	case rt == 0:
		return 3 * time.Second
	case rt < 0:
		return 0
	}
	return rt
}

// URL parameters read by ParseURL; every other one goes to go-redis.
const (
	paramPrefix       = "prefix"
	paramRecheck      = "recheck"
	paramWaitReplicas = "wait_replicas"
	paramWaitTimeout  = "wait_timeout"
	paramCluster      = "cluster"
)

// ParseURL reads a backend URL:
//
//	redis://[user:password@]host:port[/db][?param=value&…]
//	rediss://…                       the same over TLS
//	redis://host:port?addr=host2:port2&addr=host3:port3   a Redis Cluster
//	redis://host:port?cluster=true   a Redis Cluster reached through one node
//
// Parameters: prefix (Config.Prefix), recheck (Config.Recheck, a Go
// duration), wait_replicas and wait_timeout (Config.WaitReplicas,
// Config.WaitTimeout), and go-redis's own (dial_timeout, read_timeout,
// pool_size, protocol, …; see redis.ParseURL). Unknown parameters are
// errors. Errors wrap sema.ErrInvalidArgument and never repeat the password.
func ParseURL(rawURL string) (Config, error) {
	var c Config
	u, err := url.Parse(rawURL)
	if err != nil {
		return c, fmt.Errorf("%w: redis: backend url is not a valid URL", sema.ErrInvalidArgument)
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return c, fmt.Errorf("%w: redis: url scheme %q, want redis or rediss", sema.ErrInvalidArgument, u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" || u.Fragment != "" {
		return c, fmt.Errorf("%w: redis: backend url is not of the form redis://host:port[/db]", sema.ErrInvalidArgument)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return c, fmt.Errorf("%w: redis: url %q: bad query", sema.ErrInvalidArgument, u.Redacted())
	}
	bad := func(param, v string) error {
		return fmt.Errorf("%w: redis: url %q: bad %s %q", sema.ErrInvalidArgument, u.Redacted(), param, v)
	}
	take := func(param string) (string, bool) {
		vs, ok := q[param]
		delete(q, param)
		if !ok || len(vs) == 0 {
			return "", false
		}
		return vs[len(vs)-1], true
	}
	if v, ok := take(paramPrefix); ok {
		if v == "" {
			return Config{}, bad(paramPrefix, v)
		}
		c.Prefix = v
	}
	for _, d := range []struct {
		param string
		to    *time.Duration
	}{{paramRecheck, &c.Recheck}, {paramWaitTimeout, &c.WaitTimeout}} {
		if v, ok := take(d.param); ok {
			if *d.to, err = time.ParseDuration(v); err != nil || *d.to <= 0 {
				return Config{}, bad(d.param, v)
			}
		}
	}
	if v, ok := take(paramWaitReplicas); ok {
		if c.WaitReplicas, err = strconv.Atoi(v); err != nil {
			return Config{}, bad(paramWaitReplicas, v)
		}
	}
	cluster := len(q["addr"]) > 0
	if v, ok := take(paramCluster); ok {
		switch v {
		case "true", "1":
			cluster = true
		case "false", "0":
		default:
			return Config{}, bad(paramCluster, v)
		}
	}
	u.RawQuery = q.Encode()
	if cluster {
		if u.Path != "" && u.Path != "/" && u.Path != "/0" {
			return Config{}, fmt.Errorf("%w: redis: url %q: a cluster has only database 0", sema.ErrInvalidArgument, u.Redacted())
		}
		u.Path = ""
		c.Cluster, err = goredis.ParseClusterURL(u.String())
	} else {
		c.Single, err = goredis.ParseURL(u.String())
	}
	if err != nil {
		// go-redis's messages name parameters, not the password.
		return Config{}, fmt.Errorf("%w: redis: url %q: %s", sema.ErrInvalidArgument, u.Redacted(), strings.TrimPrefix(err.Error(), "redis: "))
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}
