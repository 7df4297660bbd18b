package cli

import (
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

func TestParseRunArgs(t *testing.T) {
	def := func(c runConfig) runConfig { // the defaults, where c leaves them zero
		if c.limit == 0 {
			c.limit = 1
		}
		if c.weight == 0 {
			c.weight = 1
		}
		if c.ttl == 0 {
			c.ttl, c.margin, c.grace = 15*time.Second, 3*time.Second, 1500*time.Millisecond
		}
		return c
	}
	for _, tc := range []struct {
		args string // fields separated by spaces
		want runConfig
	}{
		{"nightly -- ./job.sh a b", def(runConfig{name: "nightly", wait: -1, cmd: []string{"./job.sh", "a", "b"}})},
		{"-l 3 --weight 2 --ttl 1m --wait 10s --owner bob --max-hold 1h --grace 1s --backend file:///x pool -- x",
			runConfig{name: "pool", limit: 3, weight: 2, ttl: time.Minute, wait: 10 * time.Second, owner: "bob", conflict: 75,
				maxHold: time.Hour, margin: 12 * time.Second, grace: time.Second, backend: "file:///x", cmd: []string{"x"}}},
		// flock's habits: plain seconds, -n, -w, -E, -c, clusters.
		{"--limit 2 --ttl 10 --max-hold 3600 --grace 0.5 pool -- x",
			runConfig{name: "pool", limit: 2, weight: 1, ttl: 10 * time.Second, wait: -1, conflict: 75,
				maxHold: time.Hour, margin: 2 * time.Second, grace: 500 * time.Millisecond, cmd: []string{"x"}}},
		{"-n a -- x", def(runConfig{name: "a", wait: 0, cmd: []string{"x"}})},
		{"--nonblock a x", def(runConfig{name: "a", wait: 0, cmd: []string{"x"}})},
		{"-xn -E 1 a x", def(runConfig{name: "a", wait: 0, conflict: 1, cmd: []string{"x"}})},
		{"-w 5 a x", def(runConfig{name: "a", wait: 5 * time.Second, cmd: []string{"x"}})},
		{"-w0.25 a x", def(runConfig{name: "a", wait: 250 * time.Millisecond, cmd: []string{"x"}})},
		{"-qw 2 a x", def(runConfig{name: "a", wait: 2 * time.Second, quiet: true, cmd: []string{"x"}})},
		{"--timeout 1m a x", def(runConfig{name: "a", wait: time.Minute, cmd: []string{"x"}})},
		{"-E 0 -n a x", def(runConfig{name: "a", wait: 0, conflict: 0, cmd: []string{"x"}})},
		{"a -c true", def(runConfig{name: "a", wait: -1, cmd: []string{"sh", "-c", "true"}})},
		{"-c true a", def(runConfig{name: "a", wait: -1, cmd: []string{"sh", "-c", "true"}})},
		{"a --command true", def(runConfig{name: "a", wait: -1, cmd: []string{"sh", "-c", "true"}})},
		{"--wait 0s a x --flag", def(runConfig{name: "a", wait: 0, cmd: []string{"x", "--flag"}})},
		{"-- a x", def(runConfig{name: "a", wait: -1, cmd: []string{"x"}})},
		{"a", def(runConfig{name: "a", wait: -1})}, // hold until interrupted
		{"-n 9 -- x", def(runConfig{name: "9", wait: 0, cmd: []string{"x"}})},
	} {
		got, err := parseRun(strings.Fields(tc.args))
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if !strings.Contains(tc.args, "-E") {
			tc.want.conflict = ExitNotAcquired
		}
		if !equalRunConfig(got, tc.want) {
			t.Errorf("%q:\n got %+v\nwant %+v", tc.args, got, tc.want)
		}
	}
}

// TestParseRunArgsRefuses: what flock or consul users might type and sema
// cannot honour is refused with a message that says what to write.
func TestParseRunArgsRefuses(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"-n 3 job -- x", "--limit 3"},
		{"-n=3 job -- x", "--limit 3"},
		{"-s job -- x", "no shared"},
		{"--shared job -- x", "no shared"},
		{"-x -l 3 job -- x", "--weight 3"},
		{"-n -w 5 job -- x", "exclude each other"},
		{"-E 256 job -- x", "between 0 and 255"},
		{"-c true job -- x", "not both"},
		{"job -c", "exactly one argument"},
		{"job -c a b", "exactly one argument"},
		{"--ttl forever job x", "not a duration"},
		{"--ttl -5 job x", "negative"},
		{"job --limit 2 -- x", "flags go before NAME"},
		{"job --", "missing command"},
		{"", "missing NAME"},
	} {
		_, err := parseRun(strings.Fields(tc.args))
		if !errors.Is(err, errUsage) || !strings.Contains(errMessage(err), tc.want) {
			t.Errorf("%q: %v, want a usage error saying %q", tc.args, err, tc.want)
		}
	}
}

func equalRunConfig(a, b runConfig) bool {
	if len(a.cmd) != len(b.cmd) {
		return false
	}
	for i := range a.cmd {
		if a.cmd[i] != b.cmd[i] {
			return false
		}
	}
	a.cmd, b.cmd = nil, nil
	return a.name == b.name && a.limit == b.limit && a.weight == b.weight && a.ttl == b.ttl &&
		a.wait == b.wait && a.owner == b.owner && a.maxHold == b.maxHold && a.grace == b.grace &&
		a.margin == b.margin && a.backend == b.backend && a.conflict == b.conflict && a.quiet == b.quiet
}

// FuzzParseRunArgs: any command line is either a usage error or a
// configuration the supervisor can use as is; never a panic.
func FuzzParseRunArgs(f *testing.F) {
	for _, s := range []string{
		"nightly\x00--\x00./job.sh",
		"--limit\x003\x00--weight\x002\x00pool\x00--\x00sleep\x001",
		"--ttl\x001ns\x00x\x00--\x00y",
		"--ttl\x00100ms\x00--grace\x0010ms\x00x\x00--\x00y",
		"--wait\x00-1s\x00x\x00--\x00y",
		"--wait\x009223372036s\x00x\x00--\x00y",
		"-n\x00--wait\x001s\x00x\x00--\x00y",
		"-xnqw5\x00-E\x000\x00x\x00-c\x00true",
		"-n\x003\x00x\x00--\x00y",
		"x",
		"--limit\x009999999999999\x00x\x00--\x00y",
		"--weight\x00-5\x00x\x00--\x00y",
		"--owner\x00\xff\xfe\x00x\x00--\x00y",
		"--max-hold\x001h\x00x\x00y",
		"x\x00--limit\x002",
		"-h",
		"--\x00--\x00--",
		"\x00\x00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args := strings.Split(s, "\x00")
		cfg, err := parseRun(args)
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		if err != nil {
			if !errors.Is(err, errUsage) {
				t.Fatalf("%q: error %v does not wrap errUsage", args, err)
			}
			return
		}
		switch {
		case sema.ValidateName(cfg.name) != nil:
			t.Fatalf("%q: bad name %q accepted", args, cfg.name)
		case cfg.limit < 1 || cfg.limit > sema.MaxLimit || cfg.weight < 1 || cfg.weight > cfg.limit:
			t.Fatalf("%q: limit %d weight %d accepted", args, cfg.limit, cfg.weight)
		case sema.ValidateTTL(cfg.ttl) != nil:
			t.Fatalf("%q: ttl %v accepted", args, cfg.ttl)
		case cfg.grace < 0 || cfg.grace > cfg.margin/2 || cfg.margin != cfg.ttl/5:
			t.Fatalf("%q: grace %v margin %v for ttl %v", args, cfg.grace, cfg.margin, cfg.ttl)
		case cfg.wait < -1 || cfg.maxHold < 0:
			t.Fatalf("%q: wait %v max-hold %v", args, cfg.wait, cfg.maxHold)
		case len(cfg.cmd) > 0 && cfg.cmd[0] == "":
			t.Fatalf("%q: empty command accepted", args)
		case cfg.conflict < 0 || cfg.conflict > 255:
			t.Fatalf("%q: exit code %d accepted", args, cfg.conflict)
		}
		req := sema.Request{Name: cfg.name, ID: "fuzz-id", Owner: cfg.owner, Limit: cfg.limit, Weight: cfg.weight, TTL: cfg.ttl}
		if err := req.Validate(); err != nil && cfg.owner != req.ID {
			t.Fatalf("%q: accepted a request the core refuses: %v", args, err)
		}
	})
}

// TestParseDuration: every duration flag takes plain seconds, as flock(1)
// does, or a Go duration; nothing negative, nothing absurd.
func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"10": 10 * time.Second, "0.5": 500 * time.Millisecond, "0": 0, "1m30s": 90 * time.Second, "250ms": 250 * time.Millisecond,
	} {
		if got, err := parseDuration(in); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-5", "-1s", "1e3", "NaN", "Inf", "1e400", "99999999999999999999", "ten", "5 s"} {
		if got, err := parseDuration(in); err == nil {
			t.Errorf("parseDuration(%q) = %v, want an error", in, got)
		}
	}
}
