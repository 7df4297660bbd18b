//go:build linux

package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sema-dev/sema/internal/dsn"
)

// semaBin is the sema binary built once by TestMain, for tests that need
// real processes.
var semaBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sema-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	semaBin = filepath.Join(dir, "sema")
	goTool, err := exec.LookPath("go") // go test puts its own go first in PATH
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	build := exec.Command(goTool, "build", "-o", semaBin, "github.com/sema-dev/sema/cmd/sema")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building sema:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fileBackend returns a file:// URL in a fresh directory, or skips the test
// if this build has no file backend.
func fileBackend(t *testing.T) string {
	t.Helper()
	u := (&url.URL{Scheme: "file", Path: t.TempDir()}).String()
	b, err := dsn.Open(context.Background(), u)
	if err != nil {
		t.Skipf("file backend unavailable: %v", err)
	}
	b.Close()
	return u
}

// sema prepares the sema binary with args and SEMA_BACKEND=backend.
func semaCmd(backend string, args ...string) *exec.Cmd {
	c := exec.Command(semaBin, args...)
	c.Env = append(os.Environ(), "SEMA_BACKEND="+backend)
	return c
}

// runSema runs sema to completion and returns its output and exit code.
func runSema(t *testing.T, backend string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	c := semaCmd(backend, args...)
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	err := c.Run()
	code = c.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("sema %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

// started is a sema process running in the background.
type started struct {
	cmd    *exec.Cmd
	stdout *syncBuffer
	stderr *syncBuffer
	done   chan struct{}
}

func startSema(t *testing.T, backend string, args ...string) *started {
	t.Helper()
	return startSemaEnv(t, nil, backend, args...)
}

// startSemaEnv is startSema with extra environment variables.
func startSemaEnv(t *testing.T, env []string, backend string, args ...string) *started {
	t.Helper()
	c := semaCmd(backend, args...)
	c.Env = append(c.Env, env...)
	s := &started{cmd: c, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	c.Stdout, c.Stderr = s.stdout, s.stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.Wait(); close(s.done) }()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			c.Process.Kill()
			<-s.done
		}
	})
	return s
}

// wait returns the exit code, failing the test if it takes over d.
func (s *started) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-s.done:
		return s.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		t.Fatalf("sema %v still running after %v; stderr: %s", s.cmd.Args[1:], d, s.stderr)
		return -1
	}
}

// waitFile waits until path exists (the job is ready) and returns its
// content; it fails the test after a generous deadline.
func waitFile(t *testing.T, path string, s *started) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 && bytes.HasSuffix(b, []byte("\n")) {
			return string(b)
		}
		if s != nil {
			select {
			case <-s.done:
				t.Fatalf("sema exited (%d) before %s appeared; stderr: %s", s.cmd.ProcessState.ExitCode(), path, s.stderr)
			default:
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s did not appear", path)
	return ""
}

// processRunning reports whether pid is a live (non-zombie) process.
func processRunning(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "pid (comm) state ...": comm may hold spaces and parens.
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	return len(f) > 0 && f[0][0] != 'Z' && f[0][0] != 'X'
}

func pids(t *testing.T, s string) []int {
	t.Helper()
	var out []int
	for _, f := range strings.Fields(s) {
		var p int
		if _, err := fmt.Sscan(f, &p); err != nil {
			t.Fatalf("bad pid %q", f)
		}
		out = append(out, p)
	}
	return out
}

func sendSignal(t *testing.T, s *started, sig syscall.Signal) {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}
