package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/wire"
)

var (
	buildOnce sync.Once
	semaBin   string
	buildErr  error
	binDir    string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binary builds cmd/sema once for the tests that run real processes.
func binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "sema-server-test-")
		if buildErr != nil {
			return
		}
		semaBin = filepath.Join(binDir, "sema")
		out, err := exec.Command("go", "build", "-o", semaBin, "github.com/sema-dev/sema/cmd/sema").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return semaBin
}

// proc is a running `sema serve`.
type proc struct {
	t    testing.TB
	cmd  *exec.Cmd
	url  string
	done chan struct{}
	mu   sync.Mutex
	log  bytes.Buffer
}

var listenRE = regexp.MustCompile(`msg="sema serve: listening" addr=(\S+)`)

func startServe(t testing.TB, dir string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir}, extra...)
	cmd := exec.Command(binary(t), args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		io.Copy(io.Discard, stderr)
		close(p.done)
	}()
	t.Cleanup(func() { p.kill() })
	select {
	case a := <-addr:
		p.url = "http://" + a
	case <-p.done:
		t.Fatalf("sema serve exited before listening:\n%s", p.logs())
	case <-time.After(20 * time.Second):
		t.Fatalf("sema serve did not listen in 20s:\n%s", p.logs())
	}
	return p
}

func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// kill ends the process with SIGKILL (a no-op if it has exited).
func (p *proc) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		<-p.done
		_ = p.cmd.Wait()
	}
}

// stop sends SIGTERM and checks a clean exit.
func (p *proc) stop() {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
	if err := p.cmd.Wait(); err != nil {
		p.t.Errorf("sema serve after SIGTERM: %v\n%s", err, p.logs())
	}
}

// call posts (or gets, with a nil body) and decodes the envelope.
func call(c *http.Client, method, url string, body any) (int, wire.Envelope, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, wire.Envelope{}, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, wire.Envelope{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, wire.Envelope{}, err
	}
	var env wire.Envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return resp.StatusCode, env, fmt.Errorf("decode %q: %w", raw, err)
	}
	return resp.StatusCode, env, nil
}

func getStatus(c *http.Client, url, name string) (sema.Status, error) {
	var st sema.Status
	resp, err := c.Get(url + wire.PathLock + name)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return st, fmt.Errorf("describe: %s", resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

func TestKill9KeepsLeases(t *testing.T) {
	dir := t.TempDir()
	p := startServe(t, dir)
	c := &http.Client{Timeout: 10 * time.Second}
	acq := func(p *proc, id string) (int, wire.Envelope) {
		t.Helper()
		st, env, err := call(c, "POST", p.url+wire.PathAcquire, wire.AcquireRequest{Name: "k9", Limit: 2, ID: id, TTLMillis: 30000})
		if err != nil {
			t.Fatal(err)
		}
		return st, env
	}
	_, a := acq(p, "lease-a")
	_, b := acq(p, "lease-b")
	if a.Lease == nil || b.Lease == nil {
		t.Fatalf("acquire: %+v %+v", a, b)
	}
	// Churn on another name pushes the token counter up.
	var top uint64
	for i := range 20 {
		_, env, err := call(c, "POST", p.url+wire.PathAcquire, wire.AcquireRequest{Name: "churn", ID: fmt.Sprint("c", i)})
		if err != nil || env.Lease == nil {
			t.Fatal(err, env.Error)
		}
		top = env.Lease.Token
		call(c, "POST", p.url+wire.PathRelease, wire.ReleaseRequest{Name: "churn", ID: env.Lease.ID})
	}
	p.kill()

	p = startServe(t, dir)
	status, err := getStatus(c, p.url, "k9")
	if err != nil || status.Used != 2 || len(status.Holders) != 2 ||
		status.Holders[0].Token != a.Lease.Token || status.Holders[1].Token != b.Lease.Token {
		t.Fatalf("after kill -9: %+v, %v", status, err)
	}
	if code, env := acq(p, "lease-c"); code != 409 || env.Error == nil || env.Error.Code != wire.CodeNotAcquired {
		t.Fatalf("a third holder after restart: %d %+v", code, env)
	}
	if code, env, _ := call(c, "POST", p.url+wire.PathRenew, wire.RenewRequest{Name: "k9", ID: "lease-a", TTLMillis: 30000}); code != 200 || env.Lease.Token != a.Lease.Token {
		t.Fatalf("renew after restart: %d %+v", code, env)
	}
	if code, env, _ := call(c, "POST", p.url+wire.PathRelease, wire.ReleaseRequest{Name: "k9", ID: "lease-b"}); code != 200 {
		t.Fatalf("release after restart: %d %+v", code, env)
	}
	_, d := acq(p, "lease-d")
	if d.Lease == nil || d.Lease.Token <= top {
		t.Fatalf("after restart: %+v; want a token above %d", d, top)
	}
	// A clean stop keeps them too.
	p.stop()
	p = startServe(t, dir)
	if code, env := acq(p, "lease-e"); code != 409 {
		t.Fatalf("after SIGTERM and restart, a third holder: %d %+v", code, env)
	}
	if code, _, _ := call(c, "POST", p.url+wire.PathRelease, wire.ReleaseRequest{Name: "k9", ID: "lease-d"}); code != 200 {
		t.Fatalf("release after clean restart: %d", code)
	}
	p.stop()
}
