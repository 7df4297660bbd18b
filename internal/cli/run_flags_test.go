package cli

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

func TestParseRunArgs(t *testing.T) {
	for _, tc := range []struct {
		args string // fields separated by spaces
		want runConfig
	}{
		{"nightly -- ./job.sh a b", runConfig{name: "nightly", limit: 1, weight: 1, ttl: 15 * time.Second, wait: -1,
			margin: 3 * time.Second, grace: 1500 * time.Millisecond, cmd: []string{"./job.sh", "a", "b"}}},
		{"-n 3 --weight 2 --ttl 1m --wait 10s --owner bob --max-hold 1h --grace 1s --backend mem:// pool -- x",
			runConfig{name: "pool", limit: 3, weight: 2, ttl: time.Minute, wait: 10 * time.Second, owner: "bob",
				maxHold: time.Hour, margin: 12 * time.Second, grace: time.Second, backend: "mem://", cmd: []string{"x"}}},
		{"--no-wait a -- x", runConfig{name: "a", limit: 1, weight: 1, ttl: 15 * time.Second, wait: 0,
			margin: 3 * time.Second, grace: 1500 * time.Millisecond, cmd: []string{"x"}}},
		{"--wait 0s a x --flag", runConfig{name: "a", limit: 1, weight: 1, ttl: 15 * time.Second, wait: 0,
			margin: 3 * time.Second, grace: 1500 * time.Millisecond, cmd: []string{"x", "--flag"}}},
		{"-- a x", runConfig{name: "a", limit: 1, weight: 1, ttl: 15 * time.Second, wait: -1,
			margin: 3 * time.Second, grace: 1500 * time.Millisecond, cmd: []string{"x"}}},
	} {
		got, help, err := parseRunArgs(strings.Fields(tc.args), io.Discard)
		if err != nil || help {
			t.Errorf("%q: err %v help %v", tc.args, err, help)
			continue
		}
		if !equalRunConfig(got, tc.want) {
			t.Errorf("%q:\n got %+v\nwant %+v", tc.args, got, tc.want)
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
		a.margin == b.margin && a.backend == b.backend
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
		"--no-wait\x00--wait\x001s\x00x\x00--\x00y",
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
		cfg, help, err := parseRunArgs(args, io.Discard)
		if help {
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
		case len(cfg.cmd) == 0 || cfg.cmd[0] == "":
			t.Fatalf("%q: empty command accepted", args)
		}
		req := sema.Request{Name: cfg.name, ID: "fuzz-id", Owner: cfg.owner, Limit: cfg.limit, Weight: cfg.weight, TTL: cfg.ttl}
		if err := req.Validate(); err != nil && cfg.owner != req.ID {
			t.Fatalf("%q: accepted a request the core refuses: %v", args, err)
		}
	})
}
