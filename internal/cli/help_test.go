package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestHelp: "sema help CMD", "sema CMD --help" and "sema CMD -h" print the
// command's help on standard output; topics print too; unknown ones are a
// usage error.
func TestHelp(t *testing.T) {
	t.Parallel()
	be := fileBackend(t)
	for _, c := range commands() {
		if c.hidden {
			continue
		}
		want := "usage: sema " + c.name
		for _, args := range [][]string{{"help", c.name}, {c.name, "--help"}, {c.name, "-h"}} {
			stdout, stderr, code := runSema(t, be, args...)
			if code != ExitOK || !strings.HasPrefix(stdout, want) || stderr != "" {
				t.Errorf("sema %q: exit %d, stdout %.60q, stderr %q; want %q on stdout", args, code, stdout, stderr, want)
			}
		}
	}
	stdout, _, code := runSema(t, be, "help", "run")
	for _, s := range []string{"-w, --timeout, --wait SECONDS", "-n, --nonblock", "-l, --limit N", "-E, --conflict-exit-code CODE", "-c, --command", "-q, --quiet", "no shared"} {
		if code != ExitOK || !strings.Contains(stdout, s) {
			t.Errorf("sema help run does not show %q:\n%s", s, stdout)
		}
	}
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		stdout, _, code := runSema(t, be, args...)
		if code != ExitOK || !strings.Contains(stdout, "help topics:") || !strings.Contains(stdout, "completion") {
			t.Errorf("sema %q: exit %d, stdout %q", args, code, stdout)
		}
	}
	for _, tp := range topics() {
		stdout, _, code := runSema(t, be, "help", tp.name)
		if code != ExitOK || len(stdout) < 100 {
			t.Errorf("sema help %s: exit %d, stdout %q", tp.name, code, stdout)
		}
	}
	if _, stderr, code := runSema(t, be, "help", "nosuch"); code != ExitUsage || !strings.Contains(stderr, `"nosuch"`) {
		t.Errorf("sema help nosuch: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := runSema(t, be); code != ExitUsage || !strings.Contains(stderr, "usage: sema") {
		t.Errorf("sema alone: exit %d, stderr %q", code, stderr)
	}
}

// TestVersion: both spellings print the module version and, in a binary
// built from a checkout, the revision it was built from.
func TestVersion(t *testing.T) {
	t.Parallel()
	be := fileBackend(t)
	re := regexp.MustCompile(`^sema (\(devel\)|v\S+) \((revision [0-9a-f]{7,}, [^;]+; )?go\S+ \w+/\w+\)\n$`)
	for _, args := range [][]string{{"version"}, {"--version"}, {"-V"}} {
		stdout, stderr, code := runSema(t, be, args...)
		if code != ExitOK || !re.MatchString(stdout) || stderr != "" {
			t.Errorf("sema %q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	if _, stderr, code := runSema(t, be, "version", "x"); code != ExitUsage || stderr == "" {
		t.Errorf("sema version x: exit %d, stderr %q", code, stderr)
	}
}

// TestCompletion: the scripts are valid for their shells, and bash
// completes commands, flags and values from them.
func TestCompletion(t *testing.T) {
	t.Parallel()
	be := fileBackend(t)
	for _, sh := range []string{"bash", "zsh", "fish"} {
		stdout, stderr, code := runSema(t, be, "completion", sh)
		if code != ExitOK || !strings.Contains(stdout, "sema") || stderr != "" {
			t.Fatalf("sema completion %s: exit %d, stderr %q", sh, code, stderr)
		}
		path, err := exec.LookPath(sh)
		if err != nil {
			t.Logf("no %s here: its script is not checked", sh)
			continue
		}
		script := filepath.Join(t.TempDir(), "sema."+sh)
		if err := os.WriteFile(script, []byte(stdout), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(path, "-n", script).CombinedOutput(); err != nil {
			t.Errorf("%s -n: %v: %s", sh, err, out)
		}
	}
	if _, _, code := runSema(t, be, "completion", "tcsh"); code != ExitUsage {
		t.Errorf("sema completion tcsh: exit %d, want %d", code, ExitUsage)
	}
	if _, err := exec.LookPath("bash"); err != nil {
		return
	}
	script, _, _ := runSema(t, be, "completion", "bash")
	for _, tc := range []struct{ line, want string }{
		{"sema ", "--help --version bench completion gc help ls release run serve status version"},
		{"sema ru", "run"},
		{"sema run --no", "--nonblock"},
		{"sema run --time", "--timeout"},
		{"sema run --backend ht", "http:// https://"},
		{"sema completion ", "bash fish zsh"},
		{"sema help b", "backends bench"},
	} {
		words := strings.Fields(tc.line)
		if strings.HasSuffix(tc.line, " ") {
			words = append(words, "")
		}
		prog := script + "\nCOMP_WORDS=(" + shellWords(words) + "); COMP_CWORD=" + strconv.Itoa(len(words)-1) +
			"; _sema; printf '%s\\n' \"${COMPREPLY[@]}\" | sort | tr '\\n' ' '"
		out, err := exec.Command("bash", "-c", prog).CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != tc.want {
			t.Errorf("bash completion of %q: %q (%v), want %q", tc.line, got, err, tc.want)
		}
	}
}

func shellWords(ws []string) string {
	q := make([]string, len(ws))
	for i, w := range ws {
		q[i] = "'" + w + "'"
	}
	return strings.Join(q, " ")
}
