package cli

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sema-dev/sema"
)

const runSynopsis = "sema run [flags] NAME [--] CMD [ARGS...]\n       sema run [flags] NAME -c 'SHELL COMMAND'\n       sema run [flags] NAME"

const runHelp = `
Runs CMD while holding permits of the semaphore NAME: a lock by default, at
most N holders at once with --limit N. Without CMD, holds the permits until
interrupted (SIGINT, SIGTERM), printing the lease on standard output as the
job's variables below.

flock(1) habits work: -n (--nonblock), -w SECONDS (--timeout), -E CODE,
-c 'SHELL COMMAND', "-xn" for "-x -n"; every duration takes plain seconds
("10", "0.5") or Go durations ("1m30s"). -n is flock's --nonblock: the size
of a semaphore (consul lock -n N) is -l N, --limit N. There are no shared
(read) locks: -s is refused.

CMD runs in its own process group; SIGINT, SIGTERM, SIGHUP and SIGQUIT are
forwarded to it. It sees SEMA_NAME, SEMA_TOKEN (fencing token),
SEMA_LEASE_ID, SEMA_LIMIT and SEMA_WEIGHT in its environment. If the lease
is lost, the group gets SIGTERM at once and SIGKILL after --grace. If sema
run itself is killed, even by SIGKILL, the group is terminated the same way
and the permits are freed only once it is gone. Processes left in the group
when CMD exits are terminated too. While it waits longer than a second, sema
run says on standard error whom it waits for (-q: not).

exit status: CMD's own (128+N if killed by signal N); 75 not acquired
(--nonblock, or --timeout expired; -E sets another); 76 lease lost (CMD was
terminated); 64 usage; 69 backend error; 126/127 CMD not executable / not
found. See 'sema help exit-codes'.
`

// runConfig is the parsed command line of sema run.
type runConfig struct {
	name     string
	limit    int64
	weight   int64
	ttl      time.Duration
	wait     time.Duration // how long to wait for the permits; < 0: forever
	owner    string        // "" → default label
	maxHold  time.Duration // 0: none
	grace    time.Duration // SIGTERM → SIGKILL
	margin   time.Duration // the lease's safety margin
	backend  string        // the --backend flag ("" → env or default)
	conflict int           // exit code when not acquired
	quiet    bool
	cmd      []string // empty: hold until interrupted

	// The flags as given, before check.
	shell     string // -c
	shared    bool   // -s: refused
	exclusive bool   // -x: the default
	nonblock  nonblockFlag
	timeout   durationFlag
	ttlFlag   durationFlag
	maxHoldF  durationFlag
	graceFlag durationFlag
}

// nonblockFlag is -n, --nonblock. A number for it ("-n=3") is an attempt
// at consul lock's -n N: it says to write --limit N.
type nonblockFlag bool

func (f *nonblockFlag) IsBoolFlag() bool { return true }
func (f *nonblockFlag) String() string {
	if f != nil && *f {
		return "true"
	}
	return "false"
}

func (f *nonblockFlag) Set(s string) error {
	if n, err := strconv.Atoi(s); err == nil && n > 1 {
		return fmt.Errorf("-n is --nonblock, as in flock(1); for at most %d holders (consul lock -n %d) write --limit %d", n, n, n)
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("-n is --nonblock and takes no value")
	}
	*f = nonblockFlag(b)
	return nil
}

// register defines sema run's flags on fs.
func (c *runConfig) register(fs *flag.FlagSet) {
	c.limit, c.weight, c.conflict = 1, 1, ExitNotAcquired
	fs.Int64Var(&c.limit, "limit", 1, "`N` permits in all: at most N holders at once (1: a lock; consul lock -n N)")
	fs.Int64Var(&c.limit, "l", 1, "")
	fs.Int64Var(&c.weight, "weight", 1, "`W` permits to take, 1 ≤ W ≤ limit")
	fs.Var(&c.nonblock, "nonblock", "fail at once (exit 75, or -E) if the permits are not free, as flock -n")
	fs.Var(&c.nonblock, "n", "")
	fs.Var(&c.timeout, "timeout", "give up (exit 75, or -E) if not acquired within `SECONDS` (default: wait forever)")
	fs.Var(&c.timeout, "wait", "")
	fs.Var(&c.timeout, "w", "")
	fs.IntVar(&c.conflict, "conflict-exit-code", ExitNotAcquired, "exit `CODE` when not acquired (0-255)")
	fs.IntVar(&c.conflict, "E", ExitNotAcquired, "")
	fs.StringVar(&c.shell, "command", "", "run `'SHELL COMMAND'` with sh -c (also after NAME, as flock -c)")
	fs.StringVar(&c.shell, "c", "", "")
	fs.BoolVar(&c.quiet, "quiet", false, "say nothing while waiting or holding (errors are still said)")
	fs.BoolVar(&c.quiet, "q", false, "")
	c.ttlFlag = durationFlag{d: sema.DefaultTTL}
	fs.Var(&c.ttlFlag, "ttl", "lease time to live, `SECONDS` or a duration, renewed every ttl/3 (default 15s)")
	fs.StringVar(&c.owner, "owner", "", "owner `LABEL` shown by sema ls/status (default USER@HOST:PID CMD)")
	fs.Var(&c.maxHoldF, "max-hold", "terminate CMD (exit 76) after holding for `SECONDS` (default: no limit)")
	fs.Var(&c.graceFlag, "grace", "`SECONDS` between SIGTERM and SIGKILL when CMD must die (default and maximum ttl/10)")
	fs.BoolVar(&c.exclusive, "exclusive", false, "an exclusive lock: the default (flock -x); refused with --limit above 1")
	fs.BoolVar(&c.exclusive, "x", false, "")
	fs.BoolVar(&c.shared, "shared", false, "refused: sema has no shared (read) locks; a semaphore (--limit N) admits N holders")
	fs.BoolVar(&c.shared, "s", false, "")
	backendFlag(fs, &c.backend)
}

// parseRun parses sema run's command line, flags included. It never
// panics; every error but flag.ErrHelp (-h) wraps errUsage.
func parseRun(args []string) (runConfig, error) {
	var cfg runConfig
	fs := runCommand().newFlagSet()
	cfg.register(fs)
	rest, err := parseArgs(fs, args, false)
	if errors.Is(err, flag.ErrHelp) {
		return cfg, err
	}
	if err != nil {
		return cfg, usageError("%s", err)
	}
	return parseRunArgs(rest, cfg)
}

// parseRunArgs parses sema run's arguments, after flags: NAME, then the
// job. It never panics; every error wraps errUsage.
func parseRunArgs(rest []string, c runConfig) (runConfig, error) {
	if len(rest) == 0 {
		return c, usageError("missing NAME (usage: sema run [flags] NAME [--] CMD [ARGS...])")
	}
	c.name, rest = rest[0], rest[1:]
	if bool(c.nonblock) && len(rest) > 0 && rest[0] != "--" && isDigits(c.name) {
		return c, usageError("-n is --nonblock, as in flock(1): for at most %s holders (consul lock -n %s) write --limit %s", c.name, c.name, c.name)
	}
	shellAfter := len(rest) > 0 && (rest[0] == "-c" || rest[0] == "--command")
	switch {
	case shellAfter && len(rest) != 2:
		return c, usageError("%s after NAME takes exactly one argument: the shell command, quoted", rest[0])
	case shellAfter:
		if c.shell != "" {
			return c, usageError("-c given twice")
		}
		c.shell, rest = rest[1], nil
	case len(rest) > 0 && rest[0] == "--":
		if rest = rest[1:]; len(rest) == 0 {
			return c, usageError("missing command after --")
		}
	case len(rest) > 0 && strings.HasPrefix(rest[0], "-"):
		return c, usageError("flags go before NAME (%s after NAME); put -- between NAME and a command that starts with -", rest[0])
	}
	switch {
	case c.shell != "" && len(rest) > 0:
		return c, usageError("give either -c 'SHELL COMMAND' or a command after NAME, not both")
	case c.shell != "":
		c.cmd = []string{"sh", "-c", c.shell}
	case len(rest) > 0 && rest[0] == "":
		return c, usageError("empty command")
	default:
		c.cmd = rest
	}
	return c, c.check()
}

func isDigits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

// check validates the flags and fills in the derived values.
func (c *runConfig) check() error {
	c.ttl, c.wait, c.maxHold = c.ttlFlag.d, -1, c.maxHoldF.d
	switch {
	case c.shared:
		return usageError("-s/--shared: sema has no shared (read) locks; a semaphore admits N holders at once: --limit N")
	case c.exclusive && c.limit > 1:
		return usageError("-x/--exclusive with --limit %d: a semaphore admits %d holders; take all its permits with --weight %d", c.limit, c.limit, c.limit)
	case bool(c.nonblock) && c.timeout.set:
		return usageError("--nonblock and --timeout exclude each other")
	case c.conflict < 0 || c.conflict > 255:
		return usageError("--conflict-exit-code %d: must be between 0 and 255", c.conflict)
	case bool(c.nonblock):
		c.wait = 0
	case c.timeout.set:
		c.wait = c.timeout.d
	}
	if err := sema.ValidateName(c.name); err != nil {
		return usageError("NAME: %s", errMessage(err))
	}
	if err := sema.ValidateLimit(c.limit); err != nil {
		return usageError("--limit %d: must be between 1 and %d", c.limit, int64(sema.MaxLimit))
	}
	if c.weight < 1 || c.weight > c.limit {
		return usageError("--weight %d: must be between 1 and the limit (%d)", c.weight, c.limit)
	}
	if err := sema.ValidateTTL(c.ttl); err != nil {
		return usageError("--ttl %v: must be between %v and %v", c.ttl, sema.MinTTL, sema.MaxTTL)
	}
	if c.owner != "" {
		req := sema.Request{Name: c.name, ID: "check", Owner: c.owner, Limit: c.limit, Weight: c.weight, TTL: c.ttl}
		if c.owner == req.ID {
			req.ID = "check2"
		}
		if err := req.Validate(); err != nil {
			return usageError("--owner: at most %d bytes of UTF-8 without control characters", sema.MaxOwnerLen)
		}
	}
	if c.maxHoldF.set && c.maxHold == 0 {
		return usageError("--max-hold must be positive")
	}
	c.margin = c.ttl / 5
	c.grace = c.margin / 2
	if c.graceFlag.set {
		if c.graceFlag.d > c.grace {
			return usageError("--grace %v: at most ttl/10 (%v), so CMD is dead before the lease can pass to another holder", c.graceFlag.d, c.grace)
		}
		c.grace = c.graceFlag.d
	}
	if c.wait > time.Duration(math.MaxInt64/2) {
		c.wait = -1 // absurdly long: forever
	}
	return nil
}
