//go:build linux

package cli

import (
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

// TestGC: sema gc removes the state files of names used once by sema run,
// and the tokens of a name used again go on from where they were.
func TestGC(t *testing.T) {
	t.Parallel()
	be := fileBackend(t)
	u, _ := url.Parse(be)
	token := func(name string) string {
		t.Helper()
		out, stderr, code := runSema(t, be, "run", name, "--", "sh", "-c", "echo $SEMA_TOKEN")
		if code != 0 {
			t.Fatalf("run: exit %d: %s", code, stderr)
		}
		return strings.TrimSpace(out)
	}
	for _, day := range []string{"2025-01-01", "2025-01-02", "2025-01-03"} {
		token("report-" + day)
	}
	token("report-2025-01-01")
	if got := token("report-2025-01-01"); got != "3" {
		t.Fatalf("third token %q, want 3", got)
	}
	if out, stderr, code := runSema(t, be, "gc", "--idle", "1h"); code != 0 || !strings.Contains(out, "removed 0 idle names") {
		t.Fatalf("gc --idle 1h: exit %d, %q %q", code, out, stderr)
	}
	if out, stderr, code := runSema(t, be, "gc", "--idle", "0"); code != 0 || !strings.Contains(out, "removed 3 idle names") {
		t.Fatalf("gc --idle 0: exit %d, %q %q", code, out, stderr)
	}
	if m, _ := filepath.Glob(filepath.Join(u.Path, "*.sema")); len(m) != 0 {
		t.Fatalf("state files left: %v", m)
	}
	if got := token("report-2025-01-01"); got != "4" {
		t.Fatalf("token after gc %q, want 4", got)
	}
	if _, _, code := runSema(t, be, "gc", "extra"); code != ExitUsage {
		t.Fatalf("gc with an argument: exit %d, want %d", code, ExitUsage)
	}
}
