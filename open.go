package sema

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// An Opener opens a backend from a URL of a scheme it was registered for
// with [Register]. It must not keep cfg's fields beyond what it passes to
// the backend, and reports bad URLs with errors wrapping
// [ErrInvalidArgument] that never show a password (see [Redact]).
type Opener func(ctx context.Context, rawURL string, cfg OpenConfig) (Backend, error)

// OpenConfig is what [Open] hands every Opener besides the URL.
type OpenConfig struct {
	// Token is the bearer token for backends that authenticate with one
	// (http, https); others ignore it.
	Token string
	// Logger receives the backend's warnings. nil: slog.Default().
	Logger *slog.Logger
}

// OpenOption configures [Open].
type OpenOption func(*OpenConfig)

// WithAuthToken sets the bearer token for backends that take one: a sema
// server (http, https). Other schemes ignore it.
func WithAuthToken(token string) OpenOption { return func(c *OpenConfig) { c.Token = token } }

// WithBackendLogger sets the logger of the opened backend's warnings.
// Default: slog.Default().
func WithBackendLogger(l *slog.Logger) OpenOption { return func(c *OpenConfig) { c.Logger = l } }

var registry struct {
	mu      sync.RWMutex
	openers map[string]Opener
}

// Register makes a backend available to [Open] under a URL scheme
// (lower-case, without "://"), as database/sql drivers do. Backend packages
// call it from an init function, so that importing one — blank if need be —
// is enough:
//
//	import _ "github.com/sema-dev/sema/backend/file" // file://
//
// It panics if the scheme is registered twice or open is nil.
func Register(scheme string, open Opener) {
	if open == nil || scheme == "" || scheme != strings.ToLower(scheme) {
		panic("sema: Register(" + scheme + "): needs a lower-case scheme and an opener")
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if _, dup := registry.openers[scheme]; dup {
		panic("sema: Register called twice for scheme " + scheme)
	}
	if registry.openers == nil {
		registry.openers = make(map[string]Opener)
	}
	registry.openers[scheme] = open
}

// Schemes returns the registered URL schemes, sorted.
func Schemes() []string {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	s := make([]string, 0, len(registry.openers))
	for k := range registry.openers {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// Open opens the backend named by rawURL with the opener registered for its
// scheme by the backend's package, which the program must import:
//
//	mem://                 in-process memory (package backend/mem)
//	file:///abs/dir        state files of one host (backend/file)
//	http(s)://host:port    a sema server, `sema serve` (backend/remote)
//	redis(s)://host:port   Redis 7+ (backend/redis)
//	postgres://…           PostgreSQL (backend/postgres)
//	etcd(s)://h1,h2/prefix an etcd cluster (backend/etcd)
//
// A URL without a scheme is refused with a suggestion: "host:port" for a
// sema server, a path for a file:// directory. Open reads no environment
// variable; [OpenEnv] follows the sema command's conventions. Errors wrap
// [ErrInvalidArgument] for a bad URL, and never show a password.
func Open(ctx context.Context, rawURL string, opts ...OpenOption) (Backend, error) {
	var cfg OpenConfig
	for _, o := range opts {
		o(&cfg)
	}
	scheme, ok := urlScheme(rawURL)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrInvalidArgument, noScheme(rawURL))
	}
	registry.mu.RLock()
	open := registry.openers[strings.ToLower(scheme)]
	registry.mu.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("%w: backend URL %q: unknown scheme %q (known: %s)",
			ErrInvalidArgument, Redact(rawURL), scheme, strings.Join(Schemes(), ", "))
	}
	return open(ctx, rawURL, cfg)
}

// urlScheme returns the scheme of rawURL: letters, digits, '+', '-', '.'
// before "://", starting with a letter (RFC 3986).
func urlScheme(rawURL string) (string, bool) {
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok || scheme == "" {
		return "", false
	}
	for i, r := range scheme {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return "", false
		}
	}
	return scheme, true
}

// noScheme explains a backend URL without a scheme, suggesting the URL the
// user probably meant.
func noScheme(rawURL string) string {
	switch {
	case rawURL == "":
		return "empty backend URL"
	case strings.ContainsFunc(rawURL, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return "backend URL contains control characters"
	case looksHostPort(rawURL):
		return fmt.Sprintf("backend URL %q has no scheme: for a sema server write http://%s", rawURL, rawURL)
	case rawURL == "~" || strings.HasPrefix(rawURL, "~/"):
		return fmt.Sprintf("backend URL %q has no scheme: for a directory of lock files write file:///abs/dir (the shell does not expand ~ here)", rawURL)
	case !strings.Contains(rawURL, ":"):
		if abs, err := filepath.Abs(rawURL); err == nil {
			return fmt.Sprintf("backend URL %q has no scheme: for a directory of lock files write %s", rawURL, (&url.URL{Scheme: "file", Path: abs}).String())
		}
	}
	return fmt.Sprintf("backend URL %q has no scheme (write %s://…)", Redact(rawURL), strings.Join(Schemes(), "://…, "))
}

// looksHostPort reports whether s is "host:port": a host name or address
// (IPv6 in brackets) and a decimal port, nothing else.
func looksHostPort(s string) bool {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 || len(s)-i > 6 {
		return false
	}
	for _, r := range s[i+1:] {
		if r < '0' || r > '9' {
			return false
		}
	}
	host := s[:i]
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	} else if strings.Contains(host, ":") {
		return false
	}
	for _, r := range host {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == ':' || r == '_') {
			return false
		}
	}
	return host != ""
}
