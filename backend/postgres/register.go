package postgres

import (
	"context"

	"github.com/sema-dev/sema"
)

func init() {
	sema.Register("postgres", openURL)
	sema.Register("postgresql", openURL)
}

// openURL opens a postgres:// or postgresql:// URL (see [ParseURL]) for
// sema.Open.
func openURL(ctx context.Context, rawURL string, cfg sema.OpenConfig) (sema.Backend, error) {
	c, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	c.Logger = cfg.Logger
	b, err := Open(ctx, c)
	if err != nil {
		return nil, err
	}
	return b, nil
}
