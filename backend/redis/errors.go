package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sema-dev/sema"
)

// ErrCorrupt is wrapped by the errors of a name whose state in Redis is
// not what sema wrote (a key changed by hand, or of the wrong type). It
// wraps sema.ErrUnavailable. Deleting the name's keys (see the package
// documentation) clears it.
var ErrCorrupt = fmt.Errorf("redis: corrupt state: %w", sema.ErrUnavailable)

// wrap turns an error of go-redis, of the network or of a script into one
// that wraps a sema sentinel and says what failed once.
func wrap(op, name string, err error) error {
	if err == nil {
		return nil
	}
	what := op
	if name != "" {
		what = fmt.Sprintf("%s %q", op, name)
	}
	msg := strings.TrimPrefix(err.Error(), "redis: ")
	switch {
	case errors.Is(err, goredis.ErrClosed):
		return fmt.Errorf("redis: %s: %w", what, sema.ErrClosed)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("redis: %s: %w: %w", what, sema.ErrUnavailable, err)
	}
	var rerr goredis.Error
	if !errors.As(err, &rerr) {
		// Network and protocol errors.
		return fmt.Errorf("redis: %s: %w: %s", what, sema.ErrUnavailable, msg)
	}
	switch code, _, _ := strings.Cut(msg, " "); code {
	case "SEMACORRUPT":
		_, detail, _ := strings.Cut(msg, " ")
		detail, _, _ = strings.Cut(detail, " script:")
		return fmt.Errorf("redis: %s: %w: %s", what, ErrCorrupt, detail)
	case "WRONGTYPE":
		return fmt.Errorf("redis: %s: %w: a key under the prefix holds the wrong type of value", what, ErrCorrupt)
	case "NOAUTH", "WRONGPASS", "NOPERM":
		return fmt.Errorf("redis: %s: %w: %s", what, sema.ErrPermission, msg)
	case "READONLY":
		return fmt.Errorf("redis: %s: %w: the server is a read-only replica; connect to the primary", what, sema.ErrUnavailable)
	case "OOM":
		return fmt.Errorf("redis: %s: %w: the server is out of memory (maxmemory)", what, sema.ErrUnavailable)
	}
	return fmt.Errorf("redis: %s: %w: %s", what, sema.ErrUnavailable, msg)
}
