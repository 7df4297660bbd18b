package lockbench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/sema-dev/sema"
)

// ContendOptions configure the contend scenario (see the help of sema
// bench contend).
type ContendOptions struct {
	Procs      []int    // process counts P
	Increments int      // increments per round, over all P processes
	Rounds     int      // rounds per P, each lock once per round, in alternating order
	Locks      []string // "sema", "flock", "fifo" (the reference FIFO lock); "none" in tests
	Backend    string   // the sema backend's URL, for the report
	Dir        string   // working directory: counter and lock files
	// Spawn prepares worker process id (see Worker), which increments the
	// counter file under the sema name or a flock(2) on counter+".lock".
	// Contend sets its standard input and output.
	Spawn func(id int, counter, name string) *exec.Cmd
	// Relay is the number of increments per round of the hand-off
	// measure: two processes, each keeping the lock relayPace after its
	// increment and waiting relayPace after releasing it, so that every
	// acquisition is a hand-off to a process already waiting. 0: skip.
	Relay int
	CLI   *CLILoop // nil: no shell-loop comparison
}

// relayPace is how long a holder keeps the lock, then keeps away from it,
// in the hand-off measure.
const relayPace = time.Millisecond

// ErrLostUpdates: the counter does not show every increment made under
// the lock.
var ErrLostUpdates = errors.New("lost updates")

// contendResult is one lock at one P, over all rounds.
type contendResult struct {
	rates    []float64 // increments per second, per round
	waits    []time.Duration
	handoffs []time.Duration
	self, n  int
	cpu      time.Duration // CPU time of the processes, over all rounds
}

// Contend runs the contend scenario and prints its table to out, progress
// to progress.
func Contend(ctx context.Context, o ContendOptions, out, progress io.Writer) error {
	fmt.Fprintf(out, "contend: P processes increment one counter file, each step under one lock; %d increments per round, %d rounds, locks in alternating order; sema backend %s\n",
		o.Increments, o.Rounds, sema.Redact(o.Backend))
	fmt.Fprintf(out, "load average before: %s\n", LoadAvg())
	res := map[string]*contendResult{}
	for _, p := range o.Procs {
		rs, err := contendRounds(ctx, o, p, o.Increments, 0, progress)
		if err != nil {
			return fmt.Errorf("P=%d: %w", p, err)
		}
		for i, lk := range o.Locks {
			res[pivotKey(p, lk, "")] = rs[i]
		}
	}
	printContendTable(out, o, res)
	if o.Relay > 0 {
		rs, err := contendRounds(ctx, o, 2, o.Relay, relayPace, progress)
		if err != nil {
			return fmt.Errorf("hand-off: %w", err)
		}
		printRelay(out, o, rs)
	}
	if o.CLI != nil {
		if err := o.CLI.run(ctx, o.Dir, o.Rounds, out, progress); err != nil {
			return fmt.Errorf("shell loops: %w", err)
		}
	}
	fmt.Fprintf(out, "load average after: %s\n", LoadAvg())
	return nil
}

// contendRounds starts p workers and runs o.Rounds rounds of every lock,
// n increments each, at pace (see Worker).
func contendRounds(ctx context.Context, o ContendOptions, p, n int, pace time.Duration, progress io.Writer) (_ []*contendResult, err error) {
	path := filepath.Join(o.Dir, fmt.Sprintf("counter-%d-%d", p, pace))
	if err := counter(path).write(0, -1); err != nil {
		return nil, err
	}
	if err := resetTicketLock(path + ".fifo"); err != nil {
		return nil, err
	}
	name := "bench-contend/" + rand.Text()[:8]
	ws := make([]*worker, p)
	defer func() {
		for _, w := range ws {
			if w != nil {
				if werr := w.stop(); err == nil && werr != nil && ctx.Err() == nil {
					err = werr
				}
			}
		}
	}()
	for i := range ws {
		if ws[i], err = startWorker(o.Spawn(i, path, name)); err != nil {
			return nil, err
		}
	}
	for _, w := range ws {
		if _, err := w.next(); err != nil {
			return nil, fmt.Errorf("worker %d: %w", w.cmd.Process.Pid, err)
		}
	}
	out := make([]*contendResult, len(o.Locks))
	for i := range out {
		out[i] = &contendResult{}
	}
	want, err := readCounter(path)
	if err != nil {
		return nil, err
	}
	for r := range o.Rounds {
		for k := range o.Locks {
			i := k
			if r%2 == 1 {
				i = len(o.Locks) - 1 - k
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			d, err := contendRound(ws, o.Locks[i], n, pace, out[i])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", o.Locks[i], err)
			}
			want += int64(n)
			got, err := readCounter(path)
			if err != nil {
				return nil, err
			}
			if got != want {
				return nil, fmt.Errorf("%s: %w: the counter reads %d, %d increments were made: the lock did not exclude",
					o.Locks[i], ErrLostUpdates, got, want)
			}
			fmt.Fprintf(progress, "  P=%-3d %-5s round %d: %d increments in %v, counter exact\n", p, o.Locks[i], r+1, n, d.Round(time.Millisecond))
		}
	}
	return out, nil
}

// contendRound has the workers share n increments under lock at pace and
// adds what they measured to res.
func contendRound(ws []*worker, lock string, n int, pace time.Duration, res *contendResult) (time.Duration, error) {
	start := time.Now()
	for i, w := range ws {
		k := n / len(ws)
		if i < n%len(ws) {
			k++
		}
		if _, err := fmt.Fprintf(w.in, "%s %d %d\n", lock, k, pace.Microseconds()); err != nil {
			return 0, err
		}
	}
	for _, w := range ws {
		line, err := w.next()
		if err != nil {
			return 0, err
		}
		var r workerReport
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return 0, fmt.Errorf("worker %d: %w", w.cmd.Process.Pid, err)
		}
		switch {
		case r.Lost:
			return 0, fmt.Errorf("worker %d: %w", w.cmd.Process.Pid, ErrLostUpdates)
		case r.Err != "":
			return 0, fmt.Errorf("worker %d: %s", w.cmd.Process.Pid, r.Err)
		}
		for _, d := range r.Waits {
			res.waits = append(res.waits, time.Duration(d))
		}
		for _, d := range r.Handoffs {
			res.handoffs = append(res.handoffs, time.Duration(d))
		}
		res.self += r.Self
		res.n += len(r.Waits)
		res.cpu += time.Duration(r.CPU)
	}
	d := time.Since(start)
	res.rates = append(res.rates, float64(n)/d.Seconds())
	return d, nil
}

// worker is a running worker process.
type worker struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

func startWorker(cmd *exec.Cmd) (*worker, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w := &worker{cmd: cmd, in: in, lines: make(chan string, 1)}
	go func() {
		sc := bufio.NewScanner(outp)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
	}()
	return w, nil
}

// next returns the worker's next line of output.
func (w *worker) next() (string, error) {
	line, ok := <-w.lines
	if !ok {
		return "", fmt.Errorf("worker %d exited: %v", w.cmd.Process.Pid, w.cmd.Wait())
	}
	return line, nil
}

// stop ends the worker's input and waits for it to exit.
func (w *worker) stop() error {
	w.in.Close()
	for range w.lines {
	}
	return w.cmd.Wait()
}

func printContendTable(w io.Writer, o ContendOptions, res map[string]*contendResult) {
	fmt.Fprintln(w, "\nincrements per second (median of rounds); wait to acquire and hand-off (release → next holder in another process) over every round:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "P\tlock\tincr/s\twait p50\twait p99\twait max\thand-off p50\thand-off p99\tby last holder\tCPU/incr\t")
	for _, p := range o.Procs {
		for _, lk := range o.Locks {
			r := res[pivotKey(p, lk, "")]
			fmt.Fprintf(tw, "%d\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%.1f%%\t%s\t\n", p, lk, median(r.rates),
				fmtDur(quantile(r.waits, 0.5)), fmtDur(quantile(r.waits, 0.99)), fmtDur(quantile(r.waits, 1)),
				fmtDur(quantile(r.handoffs, 0.5)), fmtDur(quantile(r.handoffs, 0.99)), 100*float64(r.self)/float64(max(r.n, 1)),
				fmtDur(r.cpu/time.Duration(max(r.n, 1))))
		}
	}
	tw.Flush()
	fmt.Fprintln(w, "(by last holder: acquisitions by the process that made the previous increment; CPU/incr: CPU time of the P processes per increment; the count is checked after every round)")
}

func printRelay(w io.Writer, o ContendOptions, rs []*contendResult) {
	fmt.Fprintf(w, "\nhand-off with one waiter (2 processes; each holder keeps the lock %v, then keeps away %v): release → next holder\n", relayPace, relayPace)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lock\tp50\tp90\tp99\thand-offs\t")
	for i, lk := range o.Locks {
		r := rs[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t\n", lk, fmtDur(quantile(r.handoffs, 0.5)), fmtDur(quantile(r.handoffs, 0.9)),
			fmtDur(quantile(r.handoffs, 0.99)), len(r.handoffs))
	}
	tw.Flush()
}

// quantile returns the q-quantile (nearest rank) of ds, sorting ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(q*float64(len(ds))+0.999999) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ratio formats a/b.
func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64) + "×"
}
