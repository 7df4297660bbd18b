// Package dsn is the only place that maps a backend URL to a backend.
package dsn

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/mem"
)

// Schemes lists the URL schemes Open understands.
var Schemes = []string{"mem"}

// Open returns the backend named by rawURL:
//
//	mem://                 in-process memory (one process)
func Open(ctx context.Context, rawURL string) (sema.Backend, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: backend url: %v", sema.ErrInvalidArgument, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "mem", "memory":
		return mem.New(), nil
	}
	return nil, fmt.Errorf("%w: backend url %q: unknown scheme %q (known: %s)",
		sema.ErrInvalidArgument, Redact(rawURL), u.Scheme, strings.Join(Schemes, ", "))
}

// Redact hides a password in a URL for error messages and logs.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparseable url)"
	}
	return u.Redacted()
}
