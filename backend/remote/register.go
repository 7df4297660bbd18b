package remote

import (
	"context"
	"fmt"
	"net/url"

	"github.com/sema-dev/sema"
)

func init() {
	sema.Register("http", openURL)
	sema.Register("https", openURL)
}

// openURL opens "http(s)://host:port" (a sema server) for sema.Open.
func openURL(_ context.Context, rawURL string, cfg sema.OpenConfig) (sema.Backend, error) {
	if u, err := url.Parse(rawURL); err == nil && u.User != nil {
		return nil, fmt.Errorf("%w: backend URL %q: give the token with sema.WithAuthToken (the sema command reads $%s), not in the URL",
			sema.ErrInvalidArgument, sema.Redact(rawURL), sema.EnvAuthToken)
	}
	b, err := New(Config{URL: rawURL, Token: cfg.Token, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	return b, nil
}
