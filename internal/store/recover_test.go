package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/testenv"
)

// fill grants n leases on distinct names and returns the largest token.
func fill(t *testing.T, s *Store, prefix string, n int) uint64 {
	t.Helper()
	var tok uint64
	for i := range n {
		g, err := s.TryAcquire(context.Background(), req(fmt.Sprintf("%s%d", prefix, i), fmt.Sprintf("id%d", i), 1))
		if err != nil {
			t.Fatal(err)
		}
		tok = g.Token
	}
	return tok
}

func holders(t *testing.T, s *Store, prefix string) int {
	t.Helper()
	all, err := s.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, st := range all {
		n += len(st.Holders)
	}
	return n
}

func files(t *testing.T, dir, glob string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, glob))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// crashCopy copies the files of a running store: what a crash would leave
// (every returned grant is already on disk). It holds the store's lock,
// with no snapshot running, so that no log or snapshot file is created or
// deleted during the copy; the log may still grow, and the reservation
// mark be replaced, as they would up to a crash.
func crashCopy(t *testing.T, s *Store) string {
	t.Helper()
	for {
		s.mu.Lock()
		if !s.snapshotting {
			break
		}
		s.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	defer s.mu.Unlock()
	dst := t.TempDir()
	for _, p := range files(t, s.cfg.Dir, "*") {
		if filepath.Base(p) == lockName {
			continue
		}
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			// Renamed or removed since the listing (the reservation mark's
			// temporary file is written outside s.mu): a crash at this
			// point leaves it out too.
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(p)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func TestCrashCopyRecovers(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	tok := fill(t, s, "c/", 20)
	if err := s.Release(context.Background(), "c/3", "id3"); err != nil {
		t.Fatal(err)
	}
	// The release is not waited for; a grant after it makes it durable.
	fill(t, s, "d/", 1)
	s2 := openT(t, crashCopy(t, s))
	defer s2.Close()
	if n := holders(t, s2, "c/"); n != 19 {
		t.Errorf("recovered %d holders, want 19", n)
	}
	if g, _ := s2.TryAcquire(context.Background(), req("c/0", "new", 1)); g.Token != 0 {
		t.Errorf("a recovered lease was granted again: %+v", g)
	}
	if g, err := s2.TryAcquire(context.Background(), req("c/3", "new", 1)); err != nil || g.Token <= tok {
		t.Errorf("after recovery: %+v, %v; want a token > %d", g, err, tok)
	}
}

func lastSegment(t *testing.T, dir string) string {
	t.Helper()
	segs := files(t, dir, segPrefix+"*")
	if len(segs) == 0 {
		t.Fatal("no segment")
	}
	return segs[len(segs)-1]
}

func TestTornTailDropped(t *testing.T) {
	for _, tail := range []struct {
		name string
		junk func(frame []byte) []byte
	}{
		{"half a frame", func(f []byte) []byte { return f[:len(f)/2] }},
		{"header only", func(f []byte) []byte { return f[:5] }},
		{"zeros", func(f []byte) []byte { return make([]byte, 4096) }},
		{"bad checksum", func(f []byte) []byte { f[len(f)-1] ^= 0xff; return f }},
	} {
		t.Run(tail.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openT(t, dir)
			tok := fill(t, s, "t/", 5)
			s.Close()
			seg := lastSegment(t, dir)
			frame := appendFrame(nil, &record{kind: kindGrant, name: "t/torn", id: "torn", weight: 1, limit: 1,
				token: tok + 1<<40, ttl: time.Second})
			appendFile(t, seg, tail.junk(frame))
			s = openT(t, dir)
			defer s.Close()
			if n := holders(t, s, "t/"); n != 5 {
				t.Errorf("recovered %d holders, want 5", n)
			}
			if g, err := s.TryAcquire(context.Background(), req("t/x", "x", 1)); err != nil || g.Token <= tok || g.Token > 1<<40 {
				t.Errorf("next grant %+v, %v; want a token above %d (and the torn record gone)", g, err, tok)
			}
		})
	}
}

func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestSnapshotTruncatesLog: with a tiny snapshot threshold the log is cut
// again and again while leases come and go; the directory stays small and
// a crash copy taken at any point recovers the live leases.
func TestSnapshotTruncatesLog(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, SnapshotBytes: 4 << 10, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	held := fill(t, s, "keep/", 10)
	var last uint64
	for i := range 2000 {
		g, err := s.TryAcquire(ctx, req("churn", fmt.Sprintf("c%d", i), 1))
		if err != nil {
			t.Fatal(err)
		}
		last = g.Token
		if err := s.Release(ctx, "churn", g.ID); err != nil {
			t.Fatal(err)
		}
		if i%100 == 50 {
			s2 := openT(t, crashCopy(t, s))
			if n := holders(t, s2, "keep/"); n != 10 {
				t.Errorf("crash copy at %d: %d holders, want 10", i, n)
			}
			s2.Close()
		}
	}
	testenv.WaitFor(t, "the snapshot done", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.snapshotting
	})
	if n := len(files(t, dir, "*")); n > 6 {
		t.Errorf("%d files in the data dir after many snapshots: %v", n, files(t, dir, "*"))
	}
	if s.segNo < 5 {
		t.Errorf("only %d segments were started; snapshots did not run", s.segNo)
	}
	s.Close()
	s = openT(t, dir)
	defer s.Close()
	if n := holders(t, s, "keep/"); n != 10 {
		t.Errorf("after reopen: %d holders, want 10", n)
	}
	g, err := s.TryAcquire(ctx, req("churn", "after", 1))
	if err != nil || g.Token <= last || g.Token <= held {
		t.Errorf("after reopen %+v, %v; want token > %d", g, err, last)
	}
}

func TestFsyncBeforeGrantIsAnswered(t *testing.T) {
	// Every returned grant is durable: its sequence number is covered.
	s := openT(t, t.TempDir())
	defer s.Close()
	for i := range 50 {
		if _, err := s.TryAcquire(context.Background(), req(fmt.Sprintf("f%d", i), "a", 1)); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		l := s.names[fmt.Sprintf("f%d", i)].holders[0]
		s.mu.Unlock()
		if s.wal.durable.Load() < l.seq {
			t.Fatalf("grant %d returned before its record (seq %d) was durable (%d)", i, l.seq, s.wal.durable.Load())
		}
	}
}

// TestBadConfig: a configuration out of range is refused before anything
// touches the disk, with an error wrapping sema.ErrInvalidArgument.
func TestBadConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	for _, c := range []Config{{}, {Dir: dir, SnapshotBytes: -1}, {Dir: dir, FlushDelay: -time.Millisecond},
		{Dir: dir, FlushDelay: time.Hour}} {
		if s, err := Open(c); err == nil {
			s.Close()
			t.Errorf("Open(%+v) succeeded", c)
		} else if !errors.Is(err, sema.ErrInvalidArgument) {
			t.Errorf("Open(%+v): %v; want an error wrapping sema.ErrInvalidArgument", c, err)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused configuration created its data dir: %v", err)
	}
}
