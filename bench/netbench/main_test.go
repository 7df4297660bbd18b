package netbench

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Read once by TestMain; libraries never read the environment.
var (
	semaBin  string
	redisURL string
	pgURL    string
	heavy    bool
	srvEnv   []string // extra environment of the sema server
	baseBin  string   // another sema binary to compare with (BenchmarkJSON)
	srv      *server  // shared by the light benchmarks
	srvErr   error    // why srv could not start
)

func TestMain(m *testing.M) {
	redisURL = os.Getenv("SEMA_TEST_REDIS_URL")
	pgURL = os.Getenv("SEMA_TEST_POSTGRES_URL")
	heavy = os.Getenv("SEMA_BENCH_HEAVY") == "1"
	srvEnv = strings.Fields(os.Getenv("SEMA_BENCH_SERVER_ENV"))
	baseBin = os.Getenv("SEMA_BENCH_BASE_BIN")
	dir, err := os.MkdirTemp("", "sema-netbench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := run(m, dir)
	os.RemoveAll(dir)
	os.Exit(code)
}

func run(m *testing.M, dir string) int {
	semaBin = filepath.Join(dir, "sema")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	// Built in the root module, with its go.mod: the binary users get.
	build := exec.Command(gobin, "build", "-o", semaBin, "./cmd/sema")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building sema: %v\n%s", err, out)
		return 1
	}
	// A server that cannot start fails the sema benchmarks, not the others.
	if srv, srvErr = startServer(filepath.Join(dir, "data")); srv != nil {
		defer srv.kill()
	}
	return m.Run()
}

// server is a `sema serve` process on a loopback port.
type server struct {
	cmd  *exec.Cmd
	url  string
	out  *bytes.Buffer
	mu   sync.Mutex
	done chan struct{}
}

// startServer starts sema serve on its embedded store (durable: grants are
// fsynced before they are answered) in dataDir.
func startServer(dataDir string) (*server, error) { return startServerBin(semaBin, dataDir) }

// startServerBin is startServer with the sema binary bin.
func startServerBin(bin, dataDir string) (*server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	s := &server{url: "http://" + addr, out: &bytes.Buffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(bin, "serve", "--listen", addr, "--data-dir", dataDir)
	if len(srvEnv) > 0 {
		s.cmd.Env = append(os.Environ(), srvEnv...)
	}
	s.cmd.Stdout, s.cmd.Stderr = (*lockedWriter)(s), (*lockedWriter)(s)
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	hc := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-s.done:
			return nil, fmt.Errorf("sema serve exited: %s", s.output())
		default:
		}
		if resp, err := hc.Get(s.url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
	}
	s.kill()
	return nil, fmt.Errorf("sema serve did not answer within 30s: %s", s.output())
}

type lockedWriter server

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.out.Len() < 1<<20 {
		w.out.Write(p)
	}
	return len(p), nil
}

func (s *server) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

func (s *server) kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// rssBytes returns the server's resident set size.
func (s *server) rssBytes() (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", s.cmd.Process.Pid)
}

// cpuTime returns the CPU time (user+system) the server has used.
func (s *server) cpuTime() time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which is in parentheses): utime and
	// stime are fields 14 and 15 of the line, 12 and 13 after ")".
	rest := raw[bytes.LastIndexByte(raw, ')')+1:]
	f := strings.Fields(string(rest))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// fsyncs are the server's group commits so far and the time they took.
type fsyncs struct{ n, secs float64 }

// fsyncs reads the store's fsync counters from /metrics (zero if absent).
func (s *server) fsyncs() fsyncs {
	var f fsyncs
	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		return f
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		v, err := strconv.ParseFloat(val, 64)
		if !ok || err != nil {
			continue
		}
		switch name {
		case "sema_store_fsyncs_total":
			f.n = v
		case "sema_store_fsync_seconds_total":
			f.secs = v
		}
	}
	return f
}
