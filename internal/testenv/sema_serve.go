package testenv

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// SemaServer is a `sema serve` process (the binary of SemaBinary) on
// 127.0.0.1 with its embedded store in a data directory of its own.
type SemaServer struct {
	*Proc
	Addr    string // 127.0.0.1:port
	DataDir string
}

// URL is the server's http:// URL.
func (s *SemaServer) URL() string { return "http://" + s.Addr }

// StartSemaServer starts `sema serve` with extra flags for the calling
// test; it is stopped when the test ends. The package's tests must run
// through Main (SemaBinary needs it).
func StartSemaServer(tb testing.TB, extra ...string) *SemaServer {
	tb.Helper()
	bin := SemaBinary(tb)
	dir := tempDir(tb, "serve")
	var lastErr error
	for range 3 {
		port, err := freePort(false)
		if err != nil {
			tb.Fatal(err)
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		data := filepath.Join(dir, "data")
		args := append([]string{"serve", "--listen", addr, "--data-dir", data}, extra...)
		s := &SemaServer{Proc: newProc("sema serve "+addr, dir, bin, args), Addr: addr, DataDir: data}
		if lastErr = s.Start(); lastErr != nil {
			continue
		}
		if lastErr = s.waitReady(s.healthErr); lastErr == nil {
			tb.Cleanup(func() { s.Stop(0); removeAll(dir) })
			return s
		}
		s.Stop(0)
	}
	removeAll(dir)
	tb.Fatalf("testenv: sema serve did not start: %v", lastErr)
	return nil
}

func (s *SemaServer) healthErr() error {
	cl := http.Client{Timeout: time.Second}
	resp, err := cl.Get(s.URL() + "/healthz")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthz: %s", resp.Status)
	}
	return nil
}

// Restart stops the server — SIGTERM, or kill -9 if crash — and starts it
// again on the same port and data directory, waiting until it answers.
// It returns an error (with the log's tail) instead of failing the test,
// so that fault injectors running beside the test can call it.
func (s *SemaServer) Restart(crash bool) error {
	if crash {
		s.Kill()
	} else {
		s.Stop(0)
	}
	if err := s.Start(); err != nil {
		return err
	}
	return s.waitReady(s.healthErr)
}
