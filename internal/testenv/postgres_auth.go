package testenv

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// RequirePassword makes TCP logins of role to p ask for a password
// (scram-sha-256); every other role keeps trust. The rule applies from the
// server's next configuration reload, which it triggers: callers wait for
// it by trying to log in. The role itself (and its password) is the
// caller's to create.
func (p *Postgres) RequirePassword(tb testing.TB, role string) {
	tb.Helper()
	hba := filepath.Join(p.Dir, "data", "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	rule := "host all " + role + " 127.0.0.1/32 scram-sha-256\n"
	if err := os.WriteFile(hba, append([]byte(rule), old...), 0o600); err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	p.Signal(syscall.SIGHUP)
}
