package cli

import (
	"errors"
	"flag"
	"io"
	"math"
	"strings"
	"time"

	"github.com/sema-dev/sema"
)

const runSynopsis = "sema run [flags] NAME -- CMD [ARGS...]"

const runHelp = `
Runs CMD while holding permits of the semaphore NAME (a lock when --limit is 1).
CMD runs in its own process group; SIGINT, SIGTERM, SIGHUP and SIGQUIT are
forwarded to it. It sees SEMA_NAME, SEMA_TOKEN (fencing token), SEMA_LEASE_ID,
SEMA_LIMIT and SEMA_WEIGHT in its environment. If the lease is lost, the group
gets SIGTERM at once and SIGKILL after --grace. If sema run itself is killed,
even by SIGKILL, the group is terminated the same way and the permits are
freed only once it is gone. Processes left in the group when CMD exits are
terminated too.

exit status: CMD's own (128+N if killed by signal N); 75 not acquired
(--no-wait, or --wait expired); 76 lease lost (CMD was terminated); 64 usage;
69 backend error; 126/127 CMD not executable / not found.
`

// runConfig is the parsed command line of sema run.
type runConfig struct {
	name    string
	limit   int64
	weight  int64
	ttl     time.Duration
	wait    time.Duration // how long to wait for the permits; < 0: forever
	owner   string        // "" → default label
	maxHold time.Duration // 0: none
	grace   time.Duration // SIGTERM → SIGKILL
	margin  time.Duration // the lease's safety margin
	backend string        // the --backend flag ("" → env or default)
	cmd     []string
}

// parseRunArgs parses sema run's arguments. It never panics; every error
// wraps errUsage. help is true after -h (usage already printed to w).
func parseRunArgs(args []string, w io.Writer) (cfg runConfig, help bool, err error) {
	fs := newFlagSetHelp("run", runSynopsis, runHelp, w)
	limit := fs.Int64("limit", 1, "`N` permits in all: at most N holders at once (1: a lock)")
	fs.Int64Var(limit, "n", 1, "short for --limit")
	weight := fs.Int64("weight", 1, "`W` permits to take, 1 ≤ W ≤ limit")
	ttl := &durationFlag{d: sema.DefaultTTL}
	fs.Var(ttl, "ttl", "lease time to live (`duration`), renewed every ttl/3 (default 15s)")
	wait := &durationFlag{}
	fs.Var(wait, "wait", "give up (exit 75) if not acquired within this `duration` (default: wait forever)")
	noWait := fs.Bool("no-wait", false, "exit 75 at once if the permits are not free")
	owner := fs.String("owner", "", "owner `label` shown by sema ls/status (default user@host:pid CMD)")
	maxHold := &durationFlag{}
	fs.Var(maxHold, "max-hold", "terminate CMD (exit 76) after holding for this `duration` (default: no limit)")
	grace := &durationFlag{}
	fs.Var(grace, "grace", "`duration` between SIGTERM and SIGKILL when CMD must die (default and maximum ttl/10)")
	backend := backendFlag(fs)
	if err := parseFlagsErr(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, true, nil
		}
		return cfg, false, err
	}
	cfg = runConfig{limit: *limit, weight: *weight, ttl: ttl.d, wait: -1, owner: *owner,
		maxHold: maxHold.d, backend: *backend}

	rest := fs.Args()
	if len(rest) == 0 {
		return cfg, false, usageError("missing NAME and command: %s", runSynopsis)
	}
	cfg.name, rest = rest[0], rest[1:]
	switch {
	case len(rest) > 0 && rest[0] == "--":
		rest = rest[1:]
	case len(rest) > 0 && strings.HasPrefix(rest[0], "-"):
		return cfg, false, usageError("flags go before NAME; put -- between NAME and the command: %s", runSynopsis)
	}
	if len(rest) == 0 || rest[0] == "" {
		return cfg, false, usageError("missing command after NAME: %s", runSynopsis)
	}
	cfg.cmd = rest

	switch {
	case *noWait && wait.set:
		return cfg, false, usageError("--no-wait and --wait exclude each other")
	case *noWait:
		cfg.wait = 0
	case wait.set:
		cfg.wait = wait.d
	}
	if err := sema.ValidateName(cfg.name); err != nil {
		return cfg, false, usageError("NAME: %s", errMessage(err))
	}
	if err := sema.ValidateLimit(cfg.limit); err != nil {
		return cfg, false, usageError("--limit %d: must be between 1 and %d", cfg.limit, int64(sema.MaxLimit))
	}
	if cfg.weight < 1 || cfg.weight > cfg.limit {
		return cfg, false, usageError("--weight %d: must be between 1 and the limit (%d)", cfg.weight, cfg.limit)
	}
	if err := sema.ValidateTTL(cfg.ttl); err != nil {
		return cfg, false, usageError("--ttl %v: must be between %v and %v", cfg.ttl, sema.MinTTL, sema.MaxTTL)
	}
	if cfg.owner != "" {
		req := sema.Request{Name: cfg.name, ID: "check", Owner: cfg.owner, Limit: cfg.limit, Weight: cfg.weight, TTL: cfg.ttl}
		if cfg.owner == req.ID {
			req.ID = "check2"
		}
		if err := req.Validate(); err != nil {
			return cfg, false, usageError("--owner: at most %d bytes of UTF-8 without control characters", sema.MaxOwnerLen)
		}
	}
	if maxHold.set && maxHold.d == 0 {
		return cfg, false, usageError("--max-hold must be positive")
	}
	cfg.margin = cfg.ttl / 5
	cfg.grace = cfg.margin / 2
	if grace.set {
		if grace.d > cfg.grace {
			return cfg, false, usageError("--grace %v: at most ttl/10 (%v), so CMD is dead before the lease can pass to another holder", grace.d, cfg.grace)
		}
		cfg.grace = grace.d
	}
	if cfg.wait > time.Duration(math.MaxInt64/2) {
		cfg.wait = -1 // absurdly long: forever
	}
	return cfg, false, nil
}
