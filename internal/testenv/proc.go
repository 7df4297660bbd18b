// Package testenv starts the real servers sema's tests run against —
// Redis (alone or as a cluster), PostgreSQL (with PgBouncer in front if
// asked), etcd (one member or a cluster) — and builds the sema binary for
// tests that run it as a separate process.
//
// Every server listens on 127.0.0.1 only, on a free port, keeps its data in
// a temporary directory and is stopped by its PID when the test (or, for
// the shared ones, the test binary) ends. A server that is not installed or
// does not start fails the test with the reason and the end of its log:
// tests never skip silently. `./scripts/test.sh` installs the servers with
// apt on a fresh machine.
//
// A package whose tests use the shared servers (SharedRedis,
// SharedPostgres, SharedEtcd) runs them from TestMain through Main, which
// stops them when the tests are done.
package testenv

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Proc is one server process that can be stopped, killed, frozen and
// started again with the same arguments (same port, same data directory).
type Proc struct {
	Name string   // for messages: "redis 127.0.0.1:6379"
	Dir  string   // its own directory (data and log)
	Log  string   // its log file
	bin  string   // program
	args []string // arguments
	cred *syscall.Credential

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	exitErr error // how the last run ended (cmd.Wait's error)
}

func newProc(name, dir, bin string, args []string) *Proc {
	return &Proc{Name: name, Dir: dir, Log: filepath.Join(dir, "log"), bin: bin, args: args}
}

// Start starts the process (again). It does not wait for readiness.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("testenv: %s already running", p.Name)
	}
	logf, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	if p.cred != nil {
		_ = os.Chown(p.Log, int(p.cred.Uid), int(p.cred.Gid))
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Dir = p.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so that a Ctrl-C of `go test` does not reach
	// it before the test's cleanup does; Pdeathsig so that a test binary
	// killed with -9 does not leave it running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: p.cred}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("testenv: starting %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	return nil
}

// ExitErr returns how the process last exited: nil for status 0, else
// an *exec.ExitError (or the error that ended the wait for it).
func (p *Proc) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

// PID returns the process ID, or 0 when it is not running.
func (p *Proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the process has been started and has not exited.
func (p *Proc) Running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Signal sends sig to the process; it is a no-op when it is not running.
func (p *Proc) Signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Stop sends sig (SIGTERM if 0), waits up to 20 s for the exit, then
// kills. It returns once the process is gone.
func (p *Proc) Stop(sig syscall.Signal) {
	if sig == 0 {
		sig = syscall.SIGTERM
	}
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a frozen process cannot exit
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	p.mu.Lock()
	p.cmd, p.done = nil, nil
	p.mu.Unlock()
}

// Kill is kill -9: the process gets no chance to clean up.
func (p *Proc) Kill() { p.Stop(syscall.SIGKILL) }

// KillAll is kill -9 of the process and every process of its group, as a
// crash of the machine would end them: a server's workers cannot go on
// serving the connections they have (PostgreSQL's backends outlive a
// killed postmaster for a moment).
func (p *Proc) KillAll() {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // its group: Start made it a leader
	}
	p.Kill()
}

// Freeze stops the process with SIGSTOP; Thaw continues it.
func (p *Proc) Freeze() { p.Signal(syscall.SIGSTOP) }

// Thaw continues a frozen process.
func (p *Proc) Thaw() { p.Signal(syscall.SIGCONT) }

// Tail returns the last lines of the process's log, for failure messages.
func (p *Proc) Tail() string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

// waitReady polls ready until it returns nil, the process exits, or 30 s
// pass; the error carries the log's tail.
func (p *Proc) waitReady(ready func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if !p.Running() {
			return fmt.Errorf("testenv: %s exited at start; its log ends:\n%s", p.Name, p.Tail())
		}
		if err = ready(); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("testenv: %s not ready after 30 s (%v); its log ends:\n%s", p.Name, err, p.Tail())
}

// lookBin finds a server program on PATH or in the given directories.
func lookBin(tb testing.TB, name, pkg string, dirs ...string) string {
	tb.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range dirs {
		matches, _ := filepath.Glob(filepath.Join(d, name))
		if len(matches) > 0 {
			return matches[len(matches)-1]
		}
	}
	tb.Fatalf("testenv: %s is not installed (Debian package %s; ./scripts/test.sh installs it)", name, pkg)
	return ""
}

// freePort returns a TCP port on 127.0.0.1 that nobody listens on. If
// plus10k, port+10000 is free too (Redis Cluster's bus port).
func freePort(plus10k bool) (int, error) {
	for range 100 {
		if !plus10k {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return 0, err
			}
			port := l.Addr().(*net.TCPAddr).Port
			l.Close()
			return port, nil
		}
		port := 20000 + int(time.Now().UnixNano()%25000)
		if portFree(port) && portFree(port+10000) {
			return port, nil
		}
	}
	return 0, fmt.Errorf("testenv: no free port")
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// tempDir makes a directory that outlives no test: removed by cleanup.
func tempDir(tb testing.TB, pattern string) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "sema-"+pattern+"-")
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	return dir
}

// unprivileged returns the credential of an account that servers which
// refuse to run as root (PostgreSQL, PgBouncer) run as, or nil when the
// tests do not run as root.
func unprivileged(tb testing.TB, dirs ...string) *syscall.Credential {
	tb.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	var u *user.User
	var err error
	for _, name := range []string{"postgres", "nobody"} {
		if u, err = user.Lookup(name); err == nil {
			break
		}
	}
	if err != nil {
		tb.Fatalf("testenv: running as root and no unprivileged account (postgres, nobody) to run servers as")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, d := range dirs {
		_ = os.Chmod(d, 0o755)
		_ = filepath.Walk(d, func(path string, _ os.FileInfo, _ error) error {
			return os.Chown(path, uid, gid)
		})
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// run runs a helper command (initdb, redis-cli) and returns its error with
// its output.
func run(cred *syscall.Credential, dir, bin string, args ...string) error {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out.String())
	}
	return nil
}
