package file_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

// statState stats the state file of name in dir.
func statState(t *testing.T, dir, name string) fs.FileInfo {
	t.Helper()
	fi, err := os.Stat(stateFile(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

// A setgid directory is host-wide: state files are 0660 in the
// directory's group, whatever the umask; any other directory keeps them
// 0600.
func TestHostWideFileModes(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	for _, tc := range []struct {
		mode os.FileMode
		want os.FileMode
	}{{0o700, 0o600}, {0o2770 | os.ModeSetgid, 0o660}} {
		dir := t.TempDir()
		if err := os.Chmod(dir, tc.mode); err != nil {
			t.Fatal(err)
		}
		b := open(t, dir)
		c := sema.New(b)
		l, err := c.Mutex("job").Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		l.Release(context.Background())
		fi := statState(t, dir, "job")
		if got := fi.Mode().Perm(); got != tc.want {
			t.Errorf("directory %v: state file mode %#o, want %#o", tc.mode, got, tc.want)
		}
		dfi, _ := os.Stat(dir)
		if g, dg := fi.Sys().(*syscall.Stat_t).Gid, dfi.Sys().(*syscall.Stat_t).Gid; g != dg {
			t.Errorf("state file group %d, directory's %d", g, dg)
		}
	}
}

// A directory this user cannot write: the error names the lock and the
// directory, not the state file's hashed name.
func TestPermissionErrorNamesLock(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("root writes any directory; TestHostWideUsers checks this error for a user outside the group")
	}
	dir := t.TempDir()
	b := open(t, dir)
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	_, err := sema.New(b).Mutex("nightly-report").TryAcquire(context.Background())
	checkPermissionError(t, err, "nightly-report", dir)
}

func checkPermissionError(t *testing.T, err error, name, dir string) {
	t.Helper()
	if !errors.Is(err, sema.ErrUnavailable) || !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("err = %v, want ErrUnavailable and permission denied", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, strconv.Quote(name)) || !strings.Contains(msg, dir) || strings.Contains(msg, ".sema") {
		t.Fatalf("error %q: want the lock %q and the directory %s named, no state file", msg, name, dir)
	}
}

// Processes of two users of a host-wide directory's group exclude each
// other, and hand the lock over by their doorbells (the helpers re-read
// the state only once a minute: a dropped ring would show as a timeout).
// One of them reclaims the name, and the other's next token is above
// every earlier one. A user outside the group gets a permission error
// naming the lock. Users
// are made up by their IDs: only root can start processes as them.
func TestHostWideUsers(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run helper processes as other users; TestHostWideFileModes checks the modes")
	}
	const group, k = 47001, 200
	users := []syscall.Credential{{Uid: 47002, Gid: 47002, Groups: []uint32{group}}, {Uid: 47003, Gid: 47003, Groups: []uint32{group}}}
	outsider := syscall.Credential{Uid: 47004, Gid: 47004}

	base, err := os.MkdirTemp("", "sema-hostwide-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	dir := filepath.Join(base, "locks")
	counter := filepath.Join(base, "counter")
	bin := filepath.Join(base, "file.test")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Chmod(base, 0o755))
	must(os.Mkdir(dir, 0o770))
	must(os.Chown(dir, 0, group))
	must(os.Chmod(dir, 0o770|os.ModeSetgid))
	must(os.WriteFile(counter, []byte("0"), 0o666))
	must(os.Chmod(counter, 0o666))
	must(copyFile(os.Args[0], bin))

	helperAs := func(cred syscall.Credential, role string, env ...string) *helper {
		cmd := exec.Command(bin, "-test.run=^$")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &cred}
		return startHelperCmd(t, cmd, role, env...)
	}
	var hs []*helper
	for _, u := range users {
		hs = append(hs, helperAs(u, "counter", envDir+"="+dir, envName+"=cron-job",
			envArg+"="+strconv.Itoa(k), envOut+"="+counter))
	}
	var top uint64
	for _, h := range hs {
		f := h.expect("tokens", 2*time.Minute)
		for _, pair := range strings.Split(f[0], ",") {
			_, tok, _ := strings.Cut(pair, ":")
			top = max(top, uint64(atoi64(t, tok)))
		}
		if err := h.wait(time.Minute); err != nil {
			t.Fatalf("helper: %v", err)
		}
	}
	data, _ := os.ReadFile(counter)
	if got := strings.TrimSpace(string(data)); got != strconv.Itoa(len(users)*k) {
		t.Fatalf("counter = %s, want %d", got, len(users)*k)
	}
	fi := statState(t, dir, "cron-job")
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o660 || st.Gid != group {
		t.Errorf("state file mode %#o group %d, want 0660 group %d", fi.Mode().Perm(), st.Gid, group)
	}

	// One user reclaims the name made by both; the other uses it again:
	// the token floor is shared too.
	gc := helperAs(users[1], "gc", envDir+"="+dir)
	gc.expect("started", 30*time.Second)
	fmt.Fprintln(gc.stdin, "stop")
	if n := gc.expect("removed", time.Minute)[0]; n != "1" {
		t.Fatalf("the group's gc removed %s names, want 1", n)
	}
	again := helperAs(users[0], "counter", envDir+"="+dir, envName+"=cron-job", envArg+"=1", envOut+"="+counter)
	f := again.expect("tokens", time.Minute)
	if _, tok, _ := strings.Cut(f[0], ":"); uint64(atoi64(t, tok)) <= top {
		t.Fatalf("token after another user's gc %s, not above %d", tok, top)
	}

	h := helperAs(outsider, "hold", envDir+"="+dir, envName+"=cron-job", envWait+"=5s")
	line := strings.Join(h.expect("error", time.Minute), " ")
	t.Logf("outsider: %s", line)
	if !strings.Contains(line, `"cron-job"`) || !strings.Contains(line, dir) || strings.Contains(line, ".sema") ||
		!strings.Contains(line, "permission denied") || !strings.Contains(line, "group") {
		t.Errorf("outsider's error %q: want the lock, the directory and the group named, no state file", line)
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
