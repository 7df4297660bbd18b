package faults

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sync"
)

// Rec is one line of a journal. Workers append one for each invocation
// ("inv") and completion ("ret") of an operation, for each use of the
// fenced resource ("use"), for each lease end they observe ("done"), and
// once as they close their client to exit ("exit"): leases they still hold
// end there. Times are Now() readings.
type Rec struct {
	K  string `json:"k"`            // inv, ret, use, done, exit
	Op int64  `json:"op,omitempty"` // operation number, unique in the journal
	T  int64  `json:"t"`            // when

	// inv
	Type   OpType `json:"type,omitempty"`
	Name   string `json:"name,omitempty"`
	Limit  int64  `json:"limit,omitempty"`
	Weight int64  `json:"w,omitempty"`
	Keep   bool   `json:"keep,omitempty"` // keepalive on
	TTL    int64  `json:"ttl,omitempty"`  // ns
	Margin int64  `json:"margin,omitempty"`

	// ret, and inv of refresh/release (the lease they act on)
	Res   Result `json:"res,omitempty"`
	ID    string `json:"id,omitempty"`
	Token uint64 `json:"token,omitempty"`
	// Deadline is the lease's local deadline after a granted acquire or a
	// confirmed refresh, as the worker knows it: the invocation time plus
	// TTL − margin, a lower bound of the library's own deadline (which
	// counts from when it sent the request, a little later).
	Deadline int64  `json:"deadline,omitempty"`
	Err      string `json:"err,omitempty"`

	// use
	Check int64 `json:"check,omitempty"` // when the worker last saw the lease valid
	OK    bool  `json:"ok,omitempty"`    // the resource accepted the write
	Stall bool  `json:"stall,omitempty"` // written right after the worker noticed it had been stalled

	// describe and force: the holders (and, for describe, waiters) seen
	Seen []Seen `json:"seen,omitempty"`
}

// Seen is a holder or waiter as Describe or a force-release reported it.
type Seen struct {
	ID     string `json:"id,omitempty"`
	Token  uint64 `json:"token,omitempty"`
	Weight int64  `json:"w"`
	PID    int    `json:"pid,omitempty"`
	Waiter bool   `json:"waiter,omitempty"`
	Forced bool   `json:"forced,omitempty"` // describe: shown as force-released
}

// OpType names an operation.
type OpType string

// Operations. Workers record the first four; the harness the others.
const (
	OpTry      OpType = "try"     // TryAcquire
	OpAcquire  OpType = "acquire" // Acquire with a deadline
	OpRefresh  OpType = "refresh" // Lease.Refresh
	OpRelease  OpType = "release" // Lease.Release
	OpDescribe OpType = "describe"
	OpForce    OpType = "force" // sema release --force NAME
)

// Result classifies an operation's outcome.
type Result string

// Results.
const (
	ResOK      Result = "ok"      // granted, refreshed, released
	ResHeld    Result = "held"    // TryAcquire: not free (a *sema.HeldError)
	ResCancel  Result = "cancel"  // Acquire's context ended first: nothing granted
	ResLost    Result = "lost"    // Refresh: the lease is gone (ErrLeaseLost)
	ResNotHeld Result = "notheld" // Release: the backend no longer held it
	ResEnded   Result = "ended"   // Release of a lease that had ended before
	ResUnknown Result = "unknown" // any other error: the effect may or may not have happened
)

// Journal appends records to a file, one JSON line per write(2), so that
// a process killed with SIGKILL loses at most the record it was writing.
type Journal struct {
	mu  sync.Mutex
	f   *os.File
	buf bytes.Buffer
	op  int64
}

// CreateJournal creates (or truncates) the journal at path.
func CreateJournal(path string) (*Journal, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &Journal{f: f}, nil
}

// NextOp returns a fresh operation number.
func (j *Journal) NextOp() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.op++
	return j.op
}

// Add writes r; after Close it does nothing.
func (j *Journal) Add(r Rec) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return
	}
	j.buf.Reset()
	_ = json.NewEncoder(&j.buf).Encode(&r) // a Rec always encodes
	if _, err := j.f.Write(j.buf.Bytes()); err != nil {
		fmt.Fprintf(os.Stderr, "faults: journal: %v\n", err)
		os.Exit(3)
	}
}

// Close closes the file.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	f := j.f
	j.f = nil
	return f.Close()
}

// ReadJournal reads the records of a journal. A last line cut short by a
// kill is dropped; any other bad line is an error.
func ReadJournal(path string) ([]Rec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Rec
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		var r Rec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			if !bytes.HasSuffix(b, []byte("\n")) && n == bytes.Count(b, []byte("\n"))+1 {
				break // torn last line
			}
			return nil, fmt.Errorf("%s line %d: %v", path, n, err)
		}
		out = append(out, r)
	}
	return out, sc.Err()
}
