package remote_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sema-dev/sema/backend/remote"
)

// semaBin is the sema binary built by TestMain.
var semaBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sema-remote-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	semaBin = filepath.Join(dir, "sema")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	build := exec.Command(gobin, "build", "-o", semaBin, "github.com/sema-dev/sema/cmd/sema")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building sema: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is a `sema serve` process on a loopback port with its own data
// directory; it can be stopped, frozen, killed and started again on the
// same port and directory.
type server struct {
	t    testing.TB
	addr string
	dir  string
	args []string
	// scheme is "http" unless set; tlsConf is used to reach an https server.
	scheme  string
	tlsConf *tls.Config

	mu   sync.Mutex
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

// syncBuffer collects a process's output for failure messages.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 1<<20 {
		return len(p), nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServer starts a server on a fresh port and data directory; extra
// flags go after the standard ones. The test's cleanup kills it.
func startServer(t testing.TB, extra ...string) *server {
	t.Helper()
	s := &server{t: t, addr: freeAddr(t), dir: t.TempDir(), out: &syncBuffer{}}
	s.args = append([]string{"serve", "--listen", s.addr, "--data-dir", s.dir}, extra...)
	s.start()
	t.Cleanup(func() {
		s.signal(syscall.SIGKILL)
		s.wait()
		if t.Failed() {
			t.Logf("sema serve output:\n%s", s.out.String())
		}
	})
	return s
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// URL returns the server's base URL.
func (s *server) URL() string {
	if s.scheme == "" {
		return "http://" + s.addr
	}
	return s.scheme + "://" + s.addr
}

// start starts the process and waits until /healthz answers.
func (s *server) start() {
	s.t.Helper()
	s.mu.Lock()
	cmd := exec.Command(semaBin, s.args...)
	cmd.Stdout, cmd.Stderr = s.out, s.out
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		s.t.Fatalf("starting sema serve: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()

	deadline := time.Now().Add(20 * time.Second)
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: s.tlsConf}}
	for {
		resp, err := hc.Get(s.URL() + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-done:
			s.t.Fatalf("sema serve %v exited: %s\n%s", s.args, cmd.ProcessState, s.out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("sema serve did not answer /healthz within 20s: %v\n%s", err, s.out.String())
		}
	}
}

// pid returns the server's process ID.
func (s *server) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Pid
}

// signal sends sig to the running process, if any.
func (s *server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// wait waits for the process to exit.
func (s *server) wait() {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		s.t.Errorf("sema serve did not exit within 20s")
	}
}

// kill9 kills the server with SIGKILL and waits for it to be gone.
func (s *server) kill9() {
	s.signal(syscall.SIGCONT)
	s.signal(syscall.SIGKILL)
	s.wait()
}

// stop stops the server gracefully (SIGTERM) and waits for it to exit.
func (s *server) stop() {
	s.signal(syscall.SIGCONT)
	s.signal(syscall.SIGTERM)
	s.wait()
}

// restart starts the server again on the same port and data directory.
func (s *server) restart() { s.start() }

// newBackend returns a client of s, closed by the test's cleanup.
func newBackend(t testing.TB, s *server, mod ...func(*remote.Config)) *remote.Backend {
	t.Helper()
	cfg := remote.Config{URL: s.URL()}
	for _, m := range mod {
		m(&cfg)
	}
	b, err := remote.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// runSema runs the sema binary with args and returns its output and exit
// code.
func runSema(t testing.TB, ctx context.Context, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, semaBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return o.String(), e.String(), ee.ExitCode()
		}
		t.Fatalf("sema %v: %v", args, err)
	}
	return o.String(), e.String(), 0
}
