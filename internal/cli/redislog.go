package cli

import (
	"context"
	"fmt"
	"log/slog"

	goredis "github.com/redis/go-redis/v9"
)

// go-redis logs some failures itself (a dial that failed, a pool event)
// through one logger for the whole process, by default to standard error.
// sema reports every failure once, as a command's message or a log record
// of sema serve, so the command line sends go-redis's lines to a logger of
// its own at debug level: dropped by the commands, shown by
// sema serve --log-level debug.
type redisLog struct{ l *slog.Logger }

func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	r.l.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}

// routeRedisLog sends go-redis's log lines to l at debug level.
func routeRedisLog(l *slog.Logger) { goredis.SetLogger(redisLog{l}) }
