package testenv

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Sema is a `sema serve` process (the binary of SemaBinary) on a loopback
// port, with a data directory of its own; it can be stopped, killed,
// frozen and started again on the same port and directory.
type Sema struct {
	*Proc
	URL     string // http://127.0.0.1:port, or https:// with TLS
	Addr    string // 127.0.0.1:port
	DataDir string
	health  *http.Client
}

// SemaOptions configures StartSema.
type SemaOptions struct {
	Args []string  // flags after --listen and --data-dir
	TLS  *TLSFiles // serve HTTPS with this certificate
}

// StartSema starts `sema serve` for the calling test and waits until it
// answers /healthz; it is killed when the test ends (its log is shown if
// the test failed). Packages that call it run their tests through Main.
func StartSema(tb testing.TB, opt SemaOptions) *Sema {
	tb.Helper()
	bin := SemaBinary(tb)
	dir := tempDir(tb, "serve")
	port, err := freePort(false)
	if err != nil {
		tb.Fatal(err)
	}
	s := &Sema{Addr: "127.0.0.1:" + strconv.Itoa(port), DataDir: filepath.Join(dir, "data"),
		health: &http.Client{Timeout: time.Second}}
	s.URL = "http://" + s.Addr
	args := []string{"serve", "--listen", s.Addr, "--data-dir", s.DataDir}
	if opt.TLS != nil {
		s.URL = "https://" + s.Addr
		s.health.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: opt.TLS.Pool}}
		args = append(args, "--tls-cert", opt.TLS.Cert, "--tls-key", opt.TLS.Key)
	}
	s.Proc = newProc("sema serve "+s.Addr, dir, bin, append(args, opt.Args...))
	tb.Cleanup(func() {
		s.Kill()
		if tb.Failed() {
			tb.Logf("%s: its log ends:\n%s", s.Name, s.Tail())
		}
		removeAll(dir)
	})
	s.start(tb)
	return s
}

func (s *Sema) start(tb testing.TB) {
	tb.Helper()
	if err := s.Start(); err != nil {
		tb.Fatal(err)
	}
	if err := s.waitReady(s.healthy); err != nil {
		tb.Fatal(err)
	}
}

func (s *Sema) healthy() error {
	resp, err := s.health.Get(s.URL + "/healthz")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/healthz: %s", resp.Status)
	}
	return nil
}

// Restart stops the server (SIGTERM, or kill -9 if crash) and starts it
// again on the same port and data directory, waiting until it answers. A
// server that does not exit cleanly after SIGTERM fails the test.
func (s *Sema) Restart(tb testing.TB, crash bool) {
	tb.Helper()
	if crash {
		s.Kill()
	} else {
		s.Shutdown(tb)
	}
	s.start(tb)
}

// Shutdown stops the server with SIGTERM and fails the test unless it
// exits cleanly (status 0).
func (s *Sema) Shutdown(tb testing.TB) {
	tb.Helper()
	s.Stop(syscall.SIGTERM)
	if err := s.ExitErr(); err != nil {
		tb.Errorf("%s after SIGTERM: %v; its log ends:\n%s", s.Name, err, s.Tail())
	}
}

// RunSema runs the sema binary with args (and env added to the test's
// environment) and returns its output and exit code. ctx bounds it.
func RunSema(tb testing.TB, ctx context.Context, env []string, args ...string) (stdout, stderr string, code int, err error) {
	cmd := exec.CommandContext(ctx, SemaBinary(tb), args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ctx.Err() == nil {
		return o.String(), e.String(), ee.ExitCode(), nil
	}
	if err != nil {
		return o.String(), e.String(), -1, fmt.Errorf("sema %v: %w", args, err)
	}
	return o.String(), e.String(), 0, nil
}

// Stopped reports whether the process is stopped (SIGSTOP took effect:
// kill(2) returns before it does).
func (p *Proc) Stopped() bool {
	pid := p.PID()
	if pid == 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state …: the state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] == 'T'
}

// TLSFiles is a certificate and its key in files, and a pool that trusts
// the certificate.
type TLSFiles struct {
	Cert, Key string
	Pool      *x509.CertPool
}
