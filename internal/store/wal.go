package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sema-dev/sema"
)

// wal is the write-ahead log: records are appended to a buffer in memory
// (under the engine's lock, so the log order is the order of the state
// changes) and a committer goroutine writes and fsyncs them in batches:
// whatever arrived while the previous fsync ran goes out with one write and
// one fsync (group commit). Callers that need a record on disk wait for its
// batch; the others never wait.
type wal struct {
	log        *slog.Logger
	flushDelay time.Duration

	mu       sync.Mutex
	buf      []byte // frames appended to cur
	spare    []byte
	seq      uint64   // sequence number of the last appended record
	cur      *batch   // the batch collecting appends
	sealed   []*batch // closed by a rotation, waiting for the committer
	inflight *batch   // the batch being written, or nil
	urgent   bool     // someone waits for cur
	closing  bool
	failed   error // sticky: after a write or fsync error nothing is durable

	durable atomic.Uint64 // every record up to this sequence number is on disk
	bytes   atomic.Int64  // bytes appended since the last rotation
	syncs   atomic.Uint64 // batches written and fsynced
	syncNs  atomic.Int64  // time spent in write+fsync
	wake    chan struct{}
	exited  chan struct{}
	file    *os.File // owned by the committer
}

// batch is a group of records written with one write and one fsync.
// Batches are written in order.
type batch struct {
	last   uint64        // sequence number of its last record
	done   chan struct{} // closed once written (err says how)
	err    error
	data   []byte        // a sealed batch's frames
	rotate *os.File      // after this batch, append to this file instead
	then   []func(error) // whenDurable's, run by the committer once written
}

func newBatch(last uint64) *batch { return &batch{last: last, done: make(chan struct{})} }

// segHeader starts every segment file: magic and segment number.
const segMagic = "SEMAWAL\x01"

func segHeader(n uint64) []byte {
	return binary.LittleEndian.AppendUint64([]byte(segMagic), n)
}

// createSegment creates segment n in dir, writes its header and makes the
// file and its directory entry durable.
func createSegment(dir string, n uint64) (*os.File, error) {
	path := segPath(dir, n)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: create log segment: %w: %w", sema.ErrUnavailable, err)
	}
	if _, err = f.Write(segHeader(n)); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("store: create log segment: %w: %w", sema.ErrUnavailable, err)
	}
	return f, nil
}

func newWAL(f *os.File, log *slog.Logger, flushDelay time.Duration) *wal {
	w := &wal{
		log: log, flushDelay: flushDelay, file: f, cur: newBatch(0),
		wake: make(chan struct{}, 1), exited: make(chan struct{}),
	}
	go w.commitLoop()
	return w
}

func (w *wal) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// append adds r to the log and returns its sequence number. With urgent,
// the committer starts a batch at once; otherwise the record goes out with
// the next urgent one or after flushDelay.
func (w *wal) append(r *record, urgent bool) uint64 {
	w.mu.Lock()
	n := len(w.buf)
	w.buf = appendFrame(w.buf, r)
	w.bytes.Add(int64(len(w.buf) - n))
	w.seq++
	w.cur.last = w.seq
	seq := w.seq
	if n == 0 || (urgent && !w.urgent) {
		w.urgent = w.urgent || urgent
		w.signal()
	}
	w.mu.Unlock()
	return seq
}

// appended returns the number of records appended.
func (w *wal) appended() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seq
}

// rotate makes the records appended from now on go to f: it seals the
// current batch, to be written and fsynced to the current file, after
// which the committer switches to f.
func (w *wal) rotate(f *os.File) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cur.data, w.cur.rotate = w.buf, f
	w.sealed = append(w.sealed, w.cur)
	w.cur, w.buf, w.urgent = newBatch(w.seq), nil, false
	w.signal()
	w.bytes.Store(0)
}

// wait returns once record seq is on disk, or with the write error, or when
// ctx ends.
func (w *wal) wait(ctx context.Context, seq uint64) error {
	if w.durable.Load() >= seq {
		return nil
	}
	w.mu.Lock()
	b, err := w.batchOf(seq)
	w.mu.Unlock()
	if b == nil {
		return err
	}
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// batchOf returns the batch that makes record seq durable, and makes the
// committer write it soon; or nil and the log's error (nil if seq is on
// disk already). Callers hold w.mu.
func (w *wal) batchOf(seq uint64) (*batch, error) {
	if w.durable.Load() >= seq {
		return nil, nil
	}
	if w.failed != nil {
		return nil, w.failed
	}
	// Batches complete in order: the first that holds seq.
	b := w.cur
	if w.inflight != nil && seq <= w.inflight.last {
		b = w.inflight
	} else if i := slices.IndexFunc(w.sealed, func(s *batch) bool { return seq <= s.last }); i >= 0 {
		b = w.sealed[i]
	} else if !w.urgent {
		w.urgent = true
		w.signal()
	}
	return b, nil
}

// whenDurable calls fn once record seq is on disk (with nil) or the log
// failed (with its error): at once if that is known, else on the
// committer's goroutine after the batch is written. fn must not block.
func (w *wal) whenDurable(seq uint64, fn func(error)) {
	if w.durable.Load() >= seq {
		fn(nil)
		return
	}
	w.mu.Lock()
	b, err := w.batchOf(seq)
	if b != nil {
		b.then = append(b.then, fn)
	}
	w.mu.Unlock()
	if b == nil {
		fn(err)
	}
}

// close writes and fsyncs everything appended, stops the committer and
// closes the file.
func (w *wal) close() error {
	w.mu.Lock()
	w.closing = true
	w.signal()
	w.mu.Unlock()
	<-w.exited
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.file.Close()
	if w.failed != nil {
		return w.failed
	}
	if err != nil {
		return fmt.Errorf("store: close log: %w: %w", sema.ErrUnavailable, err)
	}
	return nil
}

func (w *wal) commitLoop() {
	defer close(w.exited)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		w.mu.Lock()
		pending := len(w.buf) > 0 || len(w.sealed) > 0
		urgent, closing := w.urgent || len(w.sealed) > 0, w.closing
		w.mu.Unlock()
		if !pending {
			if closing {
				return
			}
			<-w.wake
			continue
		}
		if !urgent && !closing {
			timer.Reset(w.flushDelay)
			select {
			case <-w.wake:
				timer.Stop()
				continue // re-read: may be urgent now
			case <-timer.C:
			}
		}
		// Let the goroutines that are runnable now (requests read in
		// the same network poll) append their records first: one fsync
		// then covers them all, and none waits a whole extra fsync.
		runtime.Gosched()
		w.commitOne()
	}
}

// testHookCommit, if set, runs before each batch is written (tests stall
// the committer with it).
var testHookCommit atomic.Pointer[func(*wal)]

// commitOne writes and fsyncs the oldest sealed batch, or else the
// current one.
func (w *wal) commitOne() {
	if h := testHookCommit.Load(); h != nil {
		(*h)(w)
	}
	w.mu.Lock()
	var b *batch
	var data []byte
	if len(w.sealed) > 0 {
		b, data = w.sealed[0], w.sealed[0].data
		w.sealed[0] = nil
		w.sealed = w.sealed[1:]
		b.data = nil
	} else {
		b, data = w.cur, w.buf
		w.buf, w.spare = w.spare[:0], nil
		w.cur, w.urgent = newBatch(w.seq), false
	}
	w.inflight = b
	failed := w.failed
	w.mu.Unlock()

	err := failed
	if err == nil && len(data) > 0 {
		t0 := time.Now()
		defer func() { w.syncs.Add(1); w.syncNs.Add(int64(time.Since(t0))) }()
		if _, werr := w.file.Write(data); werr != nil {
			err = fmt.Errorf("store: write log: %w: %w", sema.ErrUnavailable, werr)
		} else if serr := w.file.Sync(); serr != nil {
			err = fmt.Errorf("store: fsync log: %w: %w", sema.ErrUnavailable, serr)
		}
	}
	if b.rotate != nil {
		if cerr := w.file.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("store: close log segment: %w: %w", sema.ErrUnavailable, cerr)
		}
		w.file = b.rotate
	}
	if err != nil && failed == nil {
		w.log.Error("sema store: the log cannot be written; refusing grants from now on", "err", err)
	}
	if err == nil {
		w.durable.Store(b.last)
	}
	w.mu.Lock()
	if err != nil && w.failed == nil {
		w.failed = err
	}
	if cap(data) <= 1<<20 && w.spare == nil {
		w.spare = data[:0]
	}
	// No whenDurable adds to b from here on: it sees durable or failed.
	then := b.then
	b.then = nil
	w.mu.Unlock()
	b.err = err
	close(b.done)
	for _, fn := range then {
		fn(err)
	}
}
