package remote

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sema-dev/sema"
)

// Defaults for [Config] fields left zero.
const (
	DefaultRequestTimeout = 10 * time.Second
	DefaultMaxWait        = 10 * time.Minute
	DefaultRetryTimeout   = 30 * time.Second
	DefaultMaxIdleConns   = 256
	DefaultDialTimeout    = 5 * time.Second
)

// Config configures a [Backend]. The zero value of every field but URL
// means its default.
type Config struct {
	// URL of the server: http://host:port or https://host:port, optionally
	// with a path prefix (http://host/sema). No user info, query or
	// fragment: pass credentials in Token.
	URL string

	// Token is sent as "Authorization: Bearer <Token>" when not empty.
	Token string

	// HTTPClient, if set, is used as is (its Transport, TLS settings and
	// timeouts); TLSConfig, MaxIdleConns and DialTimeout are then ignored.
	// Its Timeout must be zero or long enough for long polls.
	HTTPClient *http.Client

	// TLSConfig is used for https URLs. Default: the system roots.
	TLSConfig *tls.Config

	// RequestTimeout bounds each call that does not wait for a lock
	// (try-acquire, renew, release, describe, list, force-release) when the
	// caller's context has no earlier deadline. Default 10 s.
	RequestTimeout time.Duration

	// MaxWait caps the wait_ms of one long poll. A blocking acquire whose
	// context outlives it polls again with the same lease ID (and goes to
	// the back of the queue). Default 10 min, the server's default cap.
	MaxWait time.Duration

	// RetryTimeout is how long a blocking acquire keeps retrying with the
	// same lease ID after the server became unreachable or answered
	// "unavailable" (for example while it restarts), before it returns an
	// error wrapping sema.ErrUnavailable. It applies once the server has
	// answered this Backend at least once: until then a failure is
	// returned at once (a wrong URL should not look like a long wait).
	// Default 30 s; negative: no retry.
	RetryTimeout time.Duration

	// MaxIdleConns is the number of keep-alive connections kept open to the
	// server (also per host). Size it to the number of concurrent callers.
	// Default 256.
	MaxIdleConns int

	// DialTimeout bounds connecting to the server. Default 5 s.
	DialTimeout time.Duration

	// Logger receives debug lines about retries. Default slog.Default().
	Logger *slog.Logger
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	if _, err := parseBase(c.URL); err != nil {
		return err
	}
	if strings.ContainsAny(c.Token, "\r\n") {
		return fmt.Errorf("%w: remote: token contains a line break", sema.ErrInvalidArgument)
	}
	switch {
	case c.RequestTimeout < 0, c.MaxWait < 0, c.MaxIdleConns < 0, c.DialTimeout < 0:
		return fmt.Errorf("%w: remote: negative timeout or size in config", sema.ErrInvalidArgument)
	case c.MaxWait > 0 && c.MaxWait < time.Millisecond:
		return fmt.Errorf("%w: remote: max wait %v below 1ms", sema.ErrInvalidArgument, c.MaxWait)
	}
	return nil
}

func (c *Config) withDefaults() Config {
	d := *c
	if d.RequestTimeout == 0 {
		d.RequestTimeout = DefaultRequestTimeout
	}
	if d.MaxWait == 0 {
		d.MaxWait = DefaultMaxWait
	}
	if d.RetryTimeout == 0 {
		d.RetryTimeout = DefaultRetryTimeout
	}
	if d.MaxIdleConns == 0 {
		d.MaxIdleConns = DefaultMaxIdleConns
	}
	if d.DialTimeout == 0 {
		d.DialTimeout = DefaultDialTimeout
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	return d
}

// parseBase checks a server URL and returns it without a trailing slash.
// Errors never echo user info.
func parseBase(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: remote: unparseable server url", sema.ErrInvalidArgument)
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		return nil, fmt.Errorf("%w: remote: server url scheme %q: want http or https", sema.ErrInvalidArgument, u.Scheme)
	case u.User != nil:
		return nil, fmt.Errorf("%w: remote: server url has user info; pass the token separately", sema.ErrInvalidArgument)
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("%w: remote: server url has no host", sema.ErrInvalidArgument)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("%w: remote: server url has a query or fragment", sema.ErrInvalidArgument)
	case u.Opaque != "":
		return nil, fmt.Errorf("%w: remote: server url is opaque", sema.ErrInvalidArgument)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%w: remote: server url port %q: must be between 1 and 65535", sema.ErrInvalidArgument, p)
		}
	}
	b := &url.URL{Scheme: scheme, Host: u.Host, Path: strings.TrimRight(u.Path, "/")}
	if u.RawPath != "" {
		b.RawPath = strings.TrimRight(u.RawPath, "/")
	}
	return b, nil
}
