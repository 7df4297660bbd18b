package cli

import (
	"net"
	"strings"
	"testing"
)

// A backend that cannot be reached is one line on standard error, sema's
// own: the client library's log lines (go-redis logs failed dials itself)
// do not reach the user.
func TestUnreachableBackendOneLine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now: connections are refused
	_, stderr, code := runSema(t, "redis://"+addr+"/0", "ls")
	if code != ExitBackend {
		t.Errorf("exit %d, want %d", code, ExitBackend)
	}
	if lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "sema ls: redis: ") {
		t.Errorf("stderr:\n%s\nwant one line \"sema ls: redis: …\"", stderr)
	}
}

// A port out of range is a mistake in the URL: a usage error at once, not
// a server to dial again and again.
func TestBackendURLBadPort(t *testing.T) {
	for _, u := range []string{"redis://127.0.0.1:99999/0", "postgres://u@127.0.0.1:99999/db", "etcd://127.0.0.1:99999/p", "http://127.0.0.1:99999"} {
		_, stderr, code := runSema(t, u, "ls")
		if code != ExitUsage || !strings.Contains(stderr, "port") {
			t.Errorf("%s: exit %d, stderr %q; want %d and a message about the port", u, code, stderr, ExitUsage)
		}
	}
}
