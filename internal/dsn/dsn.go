// Package dsn is the only place that maps a backend URL to a backend.
package dsn

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/etcd"
	"github.com/sema-dev/sema/backend/file"
	"github.com/sema-dev/sema/backend/mem"
	"github.com/sema-dev/sema/backend/postgres"
	redisb "github.com/sema-dev/sema/backend/redis"
	"github.com/sema-dev/sema/backend/remote"
)

// Schemes lists the URL schemes Open understands.
var Schemes = []string{"mem", "file", "http", "https", "redis", "rediss", "postgres", "postgresql", "etcd", "etcds"}

// Open returns the backend named by rawURL:
//
//	mem://                 in-process memory (one process)
//	file:///abs/dir        state files in a local directory (processes of one host)
//	http(s)://host:port    a sema server (`sema serve`); token: WithToken
//	redis(s)://host:port   Redis 7+, one server or a cluster (backend/redis.ParseURL)
//	postgres(ql)://...     a PostgreSQL database (see backend/postgres.ParseURL)
//	etcd(s)://h1:2379,h2:2379/prefix  an etcd cluster (see etcd.ParseURL)
func Open(ctx context.Context, rawURL string, opts ...Option) (sema.Backend, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if isEtcd(rawURL) {
		// Several hosts (IPv6 ones too) are more than url.Parse reads.
		return etcd.OpenURL(ctx, rawURL)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error quotes the whole URL, password included: say less.
		return nil, fmt.Errorf("%w: backend url is not a valid URL", sema.ErrInvalidArgument)
	}
	switch strings.ToLower(u.Scheme) {
	case "mem", "memory":
		return mem.New(), nil
	case "file":
		switch {
		case u.Host != "" || u.User != nil:
			return nil, fmt.Errorf("%w: backend url %q: file:// takes no host (%q); write file:///abs/dir, with three slashes",
				sema.ErrInvalidArgument, Redact(rawURL), u.Host)
		case u.Opaque != "" || !strings.HasPrefix(u.Path, "/"):
			return nil, fmt.Errorf("%w: backend url %q: the directory must be an absolute path, as in file:///var/lib/sema",
				sema.ErrInvalidArgument, Redact(rawURL))
		case u.RawQuery != "" || u.Fragment != "":
			return nil, fmt.Errorf("%w: backend url %q: file:// takes no query or fragment", sema.ErrInvalidArgument, Redact(rawURL))
		}
		b, err := file.Open(u.Path, nil)
		if err != nil {
			return nil, err
		}
		return b, nil
	case "http", "https":
		if u.User != nil {
			return nil, fmt.Errorf("%w: backend url %q: put the token in SEMA_AUTH_TOKEN, not in the url",
				sema.ErrInvalidArgument, Redact(rawURL))
		}
		return remote.New(remote.Config{URL: rawURL, Token: o.token})
	case "redis", "rediss":
		b, err := redisb.Open(ctx, rawURL)
		if err != nil {
			return nil, err
		}
		return b, nil
	case "postgres", "postgresql":
		cfg, err := postgres.ParseURL(rawURL)
		if err != nil {
			return nil, err
		}
		b, err := postgres.Open(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	return nil, fmt.Errorf("%w: backend url %q: unknown scheme %q (known: %s)",
		sema.ErrInvalidArgument, Redact(rawURL), u.Scheme, strings.Join(Schemes, ", "))
}

// isEtcd reports whether rawURL has an etcd:// or etcds:// scheme.
func isEtcd(rawURL string) bool {
	scheme, _, ok := strings.Cut(rawURL, "://")
	return ok && (strings.EqualFold(scheme, "etcd") || strings.EqualFold(scheme, "etcds"))
}

// Redact hides a password in a URL for error messages and logs. A URL
// without one is returned as written.
func Redact(rawURL string) string {
	if isEtcd(rawURL) {
		return etcd.Redact(rawURL)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparseable url)"
	}
	if _, ok := u.User.Password(); !ok {
		return rawURL
	}
	return u.Redacted()
}

// Option tunes Open.
type Option func(*options)

type options struct {
	token string
}

// WithToken sets the bearer token for http(s) servers (the CLI reads it
// from SEMA_AUTH_TOKEN). Other schemes ignore it.
func WithToken(token string) Option { return func(o *options) { o.token = token } }
