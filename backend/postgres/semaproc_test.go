package postgres_test

import (
	"bytes"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/sema-dev/sema/internal/testenv"
)

// proc is a sema process started by a test.
type proc struct {
	cmd    *exec.Cmd
	stderr lockedBuffer
	done   chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startSema starts the sema binary with args; it is killed when the test
// ends if it still runs.
func startSema(t testing.TB, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(testenv.SemaBinary(t), args...), done: make(chan struct{})}
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// runSema runs sema with args and returns its stdout, stderr and exit code.
func runSema(t testing.TB, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(testenv.SemaBinary(t), args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("sema %v: %v", args, err)
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

// exitCode waits up to d for the process to end and returns its status.
func (p *proc) exitCode(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		t.Fatalf("sema %v still running after %v; stderr: %s", p.cmd.Args[1:], d, p.stderr.String())
		return -1
	}
}

// waitFile waits until path holds a complete line and returns its content.
func waitFile(t testing.TB, path string, p *proc) string {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			return string(b)
		}
		if p != nil {
			select {
			case <-p.done:
				t.Fatalf("sema exited (%d) before %s appeared; stderr: %s", p.cmd.ProcessState.ExitCode(), path, p.stderr.String())
			default:
			}
		}
	}
	t.Fatalf("%s did not appear", path)
	return ""
}
