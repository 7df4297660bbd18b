package redis

import (
	"context"

	"github.com/sema-dev/sema"
)

func init() {
	sema.Register("redis", openURL)
	sema.Register("rediss", openURL)
}

// openURL opens a redis:// or rediss:// URL (see [ParseURL]) for sema.Open.
func openURL(ctx context.Context, rawURL string, cfg sema.OpenConfig) (sema.Backend, error) {
	c, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	c.Logger = cfg.Logger
	b, err := New(ctx, c)
	if err != nil {
		return nil, err
	}
	return b, nil
}
