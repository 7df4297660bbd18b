package file_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/file"
)

// The tests re-execute their own binary as helper processes: real OS
// processes sharing a directory, as users of file:// run.
const (
	envRole = "SEMA_FILE_HELPER"
	envDir  = "SEMA_FILE_DIR"
	envName = "SEMA_FILE_NAME"
	envArg  = "SEMA_FILE_ARG"  // role-specific
	envOut  = "SEMA_FILE_OUT"  // role-specific path
	envTTL  = "SEMA_FILE_TTL"  // lease TTL
	envWait = "SEMA_FILE_WAIT" // acquire timeout
)

func TestMain(m *testing.M) {
	if role := os.Getenv(envRole); role != "" {
		if err := helperMain(role); err != nil {
			fmt.Printf("error %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func durationEnv(k string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(k)); err == nil {
		return d
	}
	return def
}

// helperMain runs one helper role. Helpers report on stdout, one line per
// event. Recheck is a minute, so a wake-up that is not event-driven would
// show as a timeout.
func helperMain(role string) error {
	if role == "reopen" || role == "gc" {
		return reclaimHelper(role)
	}
	b, err := file.Open(os.Getenv(envDir), &file.Config{Recheck: time.Minute})
	if err != nil {
		return err
	}
	var back sema.Backend = b
	if role == "stophold" {
		f, err := os.OpenFile(os.Getenv(envOut), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		back = &recorder{Backend: b, f: f}
	}
	c := sema.New(back, sema.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	ttl := durationEnv(envTTL, 10*time.Second)
	m := c.Mutex(os.Getenv(envName), sema.WithTTL(ttl), sema.WithSafetyMargin(ttl/5)) // as TestStoppedHolder assumes
	ctx, cancel := context.WithTimeout(context.Background(), durationEnv(envWait, time.Minute))
	defer cancel()
	switch role {
	case "counter": // K increments of a counter file, each under the lock
		k, _ := strconv.Atoi(os.Getenv(envArg))
		var log []string
		for range k {
			l, err := m.Acquire(ctx)
			if err != nil {
				return err
			}
			n, err := bumpCounter(os.Getenv(envOut))
			if err != nil {
				return err
			}
			log = append(log, fmt.Sprintf("%d:%d", n, l.Token()))
			if err := l.Release(ctx); err != nil {
				return err
			}
		}
		fmt.Printf("tokens %s\n", strings.Join(log, ","))
	case "hold", "stophold": // hold until killed, or report the lease's end
		l, err := m.Acquire(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("acquired %d %d\n", l.Token(), l.ExpiresAt().UnixNano())
		if role == "hold" {
			time.Sleep(time.Hour)
		}
		<-l.Done()
		fmt.Printf("done %d %t %v\n", time.Now().UnixNano(), l.Err() == sema.ErrExpired, l.Err())
	case "relay": // K times: acquire, report, wait for a line on stdin, release
		k, _ := strconv.Atoi(os.Getenv(envArg))
		in := bufio.NewScanner(os.Stdin)
		for range k {
			l, err := m.Acquire(ctx)
			if err != nil {
				return err
			}
			fmt.Printf("granted %d\n", time.Now().UnixNano())
			if !in.Scan() {
				return io.ErrUnexpectedEOF
			}
			fmt.Printf("releasing %d\n", time.Now().UnixNano())
			if err := l.Release(ctx); err != nil {
				return err
			}
		}
	case "queue": // acquire weight W of limit L (envArg "L W"); stdin: "wakes" → "wakes N", "looks" → "looks N", "cancel" → "cancelled", "release" → "released"
		var limit, weight int64 = 1, 1
		fmt.Sscan(os.Getenv(envArg), &limit, &weight)
		s := c.Semaphore(os.Getenv(envName), limit, sema.WithTTL(ttl))
		granted := make(chan *sema.Lease, 1)
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			l, err := s.Acquire(actx, sema.WithWeight(weight))
			switch {
			case err != nil && actx.Err() != nil:
				fmt.Printf("cancelled %v\n", err)
				return
			case err != nil:
				fmt.Printf("error %v\n", err)
				os.Exit(1)
			}
			fmt.Printf("granted %d\n", l.Token())
			granted <- l
		}()
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			switch in.Text() {
			case "wakes":
				fmt.Printf("wakes %d\n", file.Wakeups(b))
			case "looks":
				fmt.Printf("looks %d\n", file.Looks(b))
			case "cancel":
				cancel()
			case "release":
				l := <-granted
				if err := l.Release(ctx); err != nil {
					return err
				}
				fmt.Printf("released %d\n", l.Token())
			}
		}
	case "many": // envArg "L N": N goroutines acquire 1 of limit L; report "all N" once all are granted
		var limit, n int
		fmt.Sscan(os.Getenv(envArg), &limit, &n)
		s := c.Semaphore(os.Getenv(envName), int64(limit), sema.WithTTL(ttl))
		type got struct {
			l   *sema.Lease
			err error
		}
		ch := make(chan got, n)
		for range n {
			go func() {
				l, err := s.Acquire(ctx)
				ch <- got{l, err}
			}()
		}
		fmt.Println("started 1")
		var ls []*sema.Lease
		for range n { // no release before every grant is in: a step of ours would find them
			g := <-ch
			if g.err != nil {
				return g.err
			}
			ls = append(ls, g.l)
		}
		fmt.Printf("all %d\n", n)
		for _, l := range ls {
			l.Release(context.Background())
		}
	case "wait": // acquire once and report when the backend granted it
		l, err := m.Acquire(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("granted %d %d %d\n", l.AcquiredAt().UnixNano(), l.Token(), time.Now().UnixNano())
		return l.Release(ctx)
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	return nil
}

// bumpCounter increments the number in path and returns the value read.
func bumpCounter(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, fmt.Errorf("counter file %q: %w", data, err)
	}
	return n, os.WriteFile(path, []byte(strconv.Itoa(n+1)), 0o600)
}

// recorder writes, after each successful grant or renewal, the wall-clock
// time taken just before the call. The core's local deadline counts from
// when it sent that call, so it is at most mark + TTL - margin.
type recorder struct {
	*file.Backend
	f *os.File
}

func (r *recorder) mark(t time.Time) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(t.UnixNano()))
	r.f.WriteAt(b[:], 0)
}

func (r *recorder) Acquire(ctx context.Context, req sema.Request) (sema.Grant, error) {
	t := time.Now()
	g, err := r.Backend.Acquire(ctx, req)
	if err == nil {
		r.mark(t.Add(g.Waited))
	}
	return g, err
}

func (r *recorder) Renew(ctx context.Context, name, id string, ttl time.Duration) (sema.Grant, error) {
	t := time.Now()
	g, err := r.Backend.Renew(ctx, name, id, ttl)
	if err == nil {
		r.mark(t)
	}
	return g, err
}

// helper is a running helper process.
type helper struct {
	t     testing.TB
	cmd   *exec.Cmd
	stdin io.Writer
	lines chan string
	done  chan struct{} // closed when the process has exited
	err   error         // its exit status, once done
}

// wait returns the helper's exit status.
func (h *helper) wait(d time.Duration) error {
	h.t.Helper()
	select {
	case <-h.done:
		return h.err
	case <-time.After(d):
		h.t.Fatalf("helper %d still running after %v", h.cmd.Process.Pid, d)
		return nil
	}
}

func startHelper(t testing.TB, role string, env ...string) *helper {
	t.Helper()
	return startHelperCmd(t, exec.Command(os.Args[0], "-test.run=^$"), role, env...)
}

// startHelperCmd starts cmd, a run of the test binary, as a helper.
func startHelperCmd(t testing.TB, cmd *exec.Cmd, role string, env ...string) *helper {
	t.Helper()
	cmd.Env = append(os.Environ(), append([]string{envRole + "=" + role}, env...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{t: t, cmd: cmd, stdin: in, lines: make(chan string, 16), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
		h.err = cmd.Wait()
		close(h.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		for range h.lines { // unread lines must not block the reader
		}
		<-h.done
	})
	return h
}

// expect waits for the next line, which must start with prefix, and returns
// its fields after the prefix.
func (h *helper) expect(prefix string, d time.Duration) []string {
	h.t.Helper()
	select {
	case line, ok := <-h.lines:
		if !ok {
			h.t.Fatalf("helper %d exited before %q", h.cmd.Process.Pid, prefix)
		}
		if !strings.HasPrefix(line, prefix+" ") {
			h.t.Fatalf("helper %d: want %q, got %q", h.cmd.Process.Pid, prefix, line)
		}
		return strings.Fields(line)[1:]
	case <-time.After(d):
		h.t.Fatalf("helper %d: no %q within %v", h.cmd.Process.Pid, prefix, d)
	}
	return nil
}

func atoi64(t testing.TB, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
