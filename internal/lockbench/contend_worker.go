package lockbench

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sema-dev/sema"
)

// A contend worker is one OS process of the contend scenario. It opens its
// locks once, says "ready", then for each line "LOCK K PACE" on its input
// makes K increments of the counter file under LOCK and answers with one
// JSON line (a workerReport). A PACE of N > 0 microseconds makes each
// holder keep the lock N µs after its increment, and wait N µs after
// releasing it: with two workers, every acquisition is then a hand-off to
// a process that was already waiting. It exits at the end of its input.

// WorkerArgs tell a worker process what to open.
type WorkerArgs struct {
	ID      int    // this worker's number, written into the counter file
	Counter string // the counter file
	Name    string // the sema name of the counter
	// Open opens the sema backend (nil: the worker takes no sema lock).
	Open func(ctx context.Context) (sema.Backend, error)
}

// workerReport is what a worker measured in one round.
type workerReport struct {
	Waits    []int64 `json:"waits"`    // ns spent acquiring, per increment
	Handoffs []int64 `json:"handoffs"` // ns from the previous holder's release to this acquisition, when it was another worker
	Self     int     `json:"self"`     // increments that followed this worker's own
	CPU      int64   `json:"cpu"`      // ns of CPU time this process used in the round
	Err      string  `json:"err,omitempty"`
	Lost     bool    `json:"lost,omitempty"` // Err is ErrLostUpdates
}

// counter is the shared counter file, "COUNT WORKER\n": the count and the
// worker that wrote it. It is read and written whole, as a script reads a
// file and writes it back (open, truncate, write, close).
type counter string

func (c counter) read() (n int64, worker int, err error) {
	b, err := os.ReadFile(string(c))
	if err != nil {
		return 0, 0, fmt.Errorf("counter: %w", err)
	}
	f := strings.Fields(string(b))
	n, err1 := strconv.ParseInt(f0(f), 10, 64)
	w, err2 := strconv.Atoi(f1(f))
	if len(f) != 2 || err1 != nil || err2 != nil {
		// Half written: another process was writing it meanwhile.
		return 0, 0, fmt.Errorf("counter reads %q: %w: the lock did not exclude", b, ErrLostUpdates)
	}
	return n, w, nil
}

func (c counter) write(n int64, worker int) error {
	return os.WriteFile(string(c), fmt.Appendf(nil, "%d %d\n", n, worker), 0o600)
}

func f0(f []string) string {
	if len(f) > 0 {
		return f[0]
	}
	return ""
}

func f1(f []string) string {
	if len(f) > 1 {
		return f[1]
	}
	return ""
}

// readCounter returns the count in path.
func readCounter(path string) (int64, error) {
	n, _, err := counter(path).read()
	return n, err
}

// releaseClock is a side file, beside the counter, that holds the wall-clock
// time (Unix ns) at which the last holder started to unlock: the next
// holder measures the hand-off from it. Both are read and written under
// the lock; it is not part of the measured work.
type releaseClock struct{ f *os.File }

func (r releaseClock) mark() error {
	_, err := r.f.WriteAt(binary.LittleEndian.AppendUint64(nil, uint64(time.Now().UnixNano())), 0)
	return err
}

func (r releaseClock) last() (int64, error) {
	var b [8]byte
	if _, err := r.f.ReadAt(b[:], 0); err != nil && err != io.EOF {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint64(b[:])), nil
}

// Worker runs one worker process: commands on in, reports on out.
func Worker(ctx context.Context, a WorkerArgs, in io.Reader, out io.Writer) error {
	rf, err := os.OpenFile(a.Counter+".released", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer rf.Close()
	lockers := map[string]locker{"none": noLock{}}
	fl, err := openFlock(a.Counter + ".lock")
	if err != nil {
		return err
	}
	defer fl.close()
	lockers["flock"] = fl
	tl, err := openTicketLock(a.Counter + ".fifo")
	if err != nil {
		return err
	}
	defer tl.close()
	lockers["fifo"] = tl
	if a.Open != nil {
		b, err := a.Open(ctx)
		if err != nil {
			return err
		}
		c := sema.New(b)
		defer c.Close()
		lockers["sema"] = &semaLock{m: c.Mutex(a.Name)}
	}
	fmt.Fprintln(out, "ready")
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var kind string
		var n, pace int
		_, err := fmt.Sscanf(sc.Text(), "%s %d %d", &kind, &n, &pace)
		l := lockers[kind]
		if err != nil || l == nil || n < 0 || pace < 0 {
			return fmt.Errorf("worker: bad command %q", sc.Text())
		}
		r := increments(ctx, counter(a.Counter), releaseClock{rf}, a.ID, l, n, time.Duration(pace)*time.Microsecond)
		if err := json.NewEncoder(out).Encode(r); err != nil {
			return err
		}
	}
	return sc.Err()
}

// increments makes n increments under l, each followed by pace with the
// lock held and pace without.
func increments(ctx context.Context, c counter, rc releaseClock, id int, l locker, n int, pace time.Duration) (r workerReport) {
	r = workerReport{Waits: make([]int64, 0, n)}
	cpu := selfCPU()
	defer func() { r.CPU = int64(selfCPU() - cpu) }()
	for range n {
		start := time.Now()
		unlock, err := l.lock(ctx)
		if err != nil {
			r.Err, r.Lost = err.Error(), errors.Is(err, ErrLostUpdates)
			return r
		}
		got := time.Now()
		released, err := rc.last()
		count, last, rerr := c.read()
		if err == nil {
			err = rerr
		}
		if err == nil {
			err = c.write(count+1, id)
		}
		if pace > 0 {
			time.Sleep(pace)
		}
		if err == nil {
			err = rc.mark()
		}
		if uerr := unlock(); err == nil {
			err = uerr
		}
		if err != nil {
			r.Err, r.Lost = err.Error(), errors.Is(err, ErrLostUpdates)
			return r
		}
		if pace > 0 {
			time.Sleep(pace)
		}
		r.Waits = append(r.Waits, int64(got.Sub(start)))
		if last == id {
			r.Self++
		} else if released > 0 {
			r.Handoffs = append(r.Handoffs, got.UnixNano()-released)
		}
	}
	return r
}

// locker is one way to take the counter's lock.
type locker interface {
	lock(ctx context.Context) (unlock func() error, err error)
}

type semaLock struct{ m *sema.Semaphore }

func (s *semaLock) lock(ctx context.Context) (func() error, error) {
	l, err := s.m.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return func() error { return l.Release(context.Background()) }, nil
}

// noLock takes no lock: the tests use it to show that the count check can
// fail.
type noLock struct{}

func (noLock) lock(context.Context) (func() error, error) { return func() error { return nil }, nil }
