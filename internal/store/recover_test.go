package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
// with no snapshot running, so that no file is created or deleted during
// the copy; the log may still grow, as it would up to a crash.
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

// twoLives leaves in dir what two runs of a store leave: snapshot 2 with
// the leases x/0..x/2 (limit 1), log segment 2 with the grants of y/0..y/2.
// It returns the largest token.
func twoLives(t *testing.T, dir string) uint64 {
	t.Helper()
	s := openT(t, dir)
	fill(t, s, "x/", 3)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir)
	tok := fill(t, s, "y/", 3)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := files(t, dir, "*.*"); len(got) != 2 || filepath.Base(got[0]) != "snap-0000000000000002.snap" ||
		filepath.Base(got[1]) != "wal-0000000000000002.log" {
		t.Fatalf("after two lives the data dir holds %v", got)
	}
	return tok
}

// writeSegment writes log segment n in dir: its header (the first cut
// bytes of it if cut > 0), then the frames of recs, then junk.
func writeSegment(t *testing.T, dir string, n uint64, cut int, junk []byte, recs ...record) {
	t.Helper()
	b := segHeader(n)
	if cut > 0 {
		b = b[:cut]
	}
	for i := range recs {
		b = appendFrame(b, &recs[i])
	}
	writeFile(t, segPath(dir, n), append(b, junk...))
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func grantRec(name, id string, limit int64, token uint64) record {
	return record{kind: kindGrant, name: name, id: id, weight: 1, limit: limit, token: token, ttl: 10 * time.Second}
}

// TestCorruptionIsAnError: a data directory damaged anywhere but at the
// torn end of its log is refused, with an error that says it is damaged
// (errCorrupt, sema.ErrUnavailable) and names the file or the name at
// fault.
func TestCorruptionIsAnError(t *testing.T) {
	seg2, snap2 := "wal-0000000000000002.log", "snap-0000000000000002.snap"
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, dir string) (names string)
	}{
		{"record in the middle of the log", func(t *testing.T, dir string) string {
			b := readFile(t, segPath(dir, 2))
			if len(b) < len(segHeader(0))+3*frameHeader+30 {
				t.Fatalf("segment 2 holds %d bytes: not three records", len(b))
			}
			b[len(segHeader(0))+frameHeader+3] ^= 0x55 // inside the first record
			writeFile(t, segPath(dir, 2), b)
			return seg2
		}},
		{"segment header", func(t *testing.T, dir string) string {
			b := readFile(t, segPath(dir, 2))
			b[0] = 'X'
			writeFile(t, segPath(dir, 2), b)
			return seg2
		}},
		{"segment numbered wrong", func(t *testing.T, dir string) string {
			b := readFile(t, segPath(dir, 2))
			copy(b, segHeader(7))
			writeFile(t, segPath(dir, 2), b)
			return seg2
		}},
		{"snapshot", func(t *testing.T, dir string) string {
			b := readFile(t, snapPath(dir, 2))
			b[len(b)-2] ^= 0x01
			writeFile(t, snapPath(dir, 2), b)
			return snap2
		}},
		{"snapshot truncated", func(t *testing.T, dir string) string {
			b := readFile(t, snapPath(dir, 2))
			writeFile(t, snapPath(dir, 2), b[:len(b)-7])
			return snap2
		}},
		{"snapshot missing", func(t *testing.T, dir string) string {
			if err := os.Remove(snapPath(dir, 2)); err != nil {
				t.Fatal(err)
			}
			return "has log segments but no snapshot"
		}},
		{"segment missing", func(t *testing.T, dir string) string {
			if err := os.Rename(segPath(dir, 2), segPath(dir, 9)); err != nil {
				t.Fatal(err)
			}
			return seg2 + " is missing"
		}},
		{"segment shorter than its header before the tail", func(t *testing.T, dir string) string {
			writeSegment(t, dir, 3, 5, nil)
			writeSegment(t, dir, 4, 0, nil, grantRec("z/a", "a", 1, 1000))
			return "wal-0000000000000003.log"
		}},
		{"reservation mark", func(t *testing.T, dir string) string {
			writeFile(t, filepath.Join(dir, reserveName), []byte("SEMARSV\x01 not a mark"))
			return reserveName
		}},
		{"holders disagree on the limit", func(t *testing.T, dir string) string {
			writeSegment(t, dir, 3, 0, nil, grantRec("x/0", "other", 2, 1000))
			return `"x/0" disagree on the limit`
		}},
		{"holders beyond the limit", func(t *testing.T, dir string) string {
			writeSegment(t, dir, 3, 0, nil, grantRec("x/1", "other", 1, 1000))
			return `"x/1" use 2 permits of 1`
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			twoLives(t, dir)
			names := c.damage(t, dir)
			s, err := Open(Config{Dir: dir, Logger: quiet})
			if err == nil {
				s.Close()
				t.Fatal("Open of a damaged store succeeded")
			}
			if !errors.Is(err, errCorrupt) || !errors.Is(err, sema.ErrUnavailable) || !strings.Contains(err.Error(), names) {
				t.Fatalf("Open: %v\nwant an error wrapping errCorrupt and sema.ErrUnavailable that says %q", err, names)
			}
		})
	}
}

// TestRecoverAcrossSegments: a snapshot and three log segments after it
// (a store that rotated its log twice and then crashed before its next
// snapshot) are replayed in order: grants, ends and TTL records of every
// segment count, and the tokens continue above the largest.
func TestRecoverAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	top := twoLives(t, dir)
	raise := record{kind: kindTTL, name: "y/0", id: "id0", ttl: time.Hour}
	end := func(name, id string) record { return record{kind: kindEnd, name: name, id: id, reason: endRelease} }
	writeSegment(t, dir, 3, 0, nil, grantRec("z/a", "a", 1, top+1), raise, end("x/1", "id1"))
	writeSegment(t, dir, 4, 0, nil, grantRec("z/b", "b", 2, top+5), end("z/a", "a"), grantRec("z/b", "c", 2, top+6))
	s := openT(t, dir)
	defer s.Close()
	for prefix, want := range map[string]int{"x/": 2, "y/": 3, "z/a": 0, "z/b": 2} {
		if n := holders(t, s, prefix); n != want {
			t.Errorf("%s: %d holders recovered, want %d", prefix, n, want)
		}
	}
	st, err := s.Describe(context.Background(), "y/0")
	if err != nil || len(st.Holders) != 1 || time.Until(st.Holders[0].ExpiresAt) < 30*time.Minute {
		t.Errorf("y/0 after its TTL record of an hour: %+v, %v", st, err)
	}
	if g, err := s.TryAcquire(context.Background(), req("z/a", "new", 1)); err != nil || g.Token <= top+6 {
		t.Errorf("next grant %+v, %v; want a token above %d", g, err, top+6)
	}
	if s.segNo != 5 {
		t.Errorf("the store writes to segment %d after segments up to 4", s.segNo)
	}
	if got := files(t, dir, "*.*"); len(got) != 2 {
		t.Errorf("after recovery the data dir holds %v; want one snapshot and one segment", got)
	}
}

// TestRecoverRotationCrash: a crash during a rotation leaves segments
// after the last one written to that are empty, hold only their header or
// part of it; recovery skips them, still drops the torn end of the last
// segment with records, and numbers its own segment after all of them.
func TestRecoverRotationCrash(t *testing.T) {
	dir := t.TempDir()
	top := twoLives(t, dir)
	torn := appendFrame(nil, &record{kind: kindGrant, name: "z/torn", id: "t", weight: 1, limit: 1, token: top + 1<<40, ttl: time.Second})
	writeSegment(t, dir, 3, 0, torn[:len(torn)/2], grantRec("z/a", "a", 1, top+1))
	writeSegment(t, dir, 4, 0, nil)
	writeSegment(t, dir, 5, 5, nil)
	writeFile(t, segPath(dir, 6), nil)
	s := openT(t, dir)
	defer s.Close()
	if n := holders(t, s, ""); n != 7 {
		t.Errorf("%d holders recovered, want 7", n)
	}
	if g, err := s.TryAcquire(context.Background(), req("z/b", "b", 1)); err != nil || g.Token <= top+1 || g.Token >= 1<<40 {
		t.Errorf("next grant %+v, %v; want a token above %d (and the torn record gone)", g, err, top+1)
	}
	if s.segNo != 7 {
		t.Errorf("the store writes to segment %d after segments up to 6", s.segNo)
	}
}

// TestRecoverTailShorterThanHeader: Open writes its snapshot, then creates
// its segment; a crash in between leaves a segment shorter than its
// header as the only one, which is no damage.
func TestRecoverTailShorterThanHeader(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	top := fill(t, s, "x/", 3)
	s.Close()
	s = openT(t, dir) // snapshot 2 holds the leases; segment 2 nothing
	s.Close()
	seg := readFile(t, segPath(dir, 2))
	if len(seg) != len(segHeader(2)) {
		t.Fatalf("segment 2 holds %d bytes, want its header only", len(seg))
	}
	writeFile(t, segPath(dir, 2), seg[:5])
	s = openT(t, dir)
	defer s.Close()
	if n := holders(t, s, "x/"); n != 3 {
		t.Errorf("%d holders recovered, want 3", n)
	}
	if g, err := s.TryAcquire(context.Background(), req("y", "y", 1)); err != nil || g.Token <= top {
		t.Errorf("next grant %+v, %v; want a token above %d", g, err, top)
	}
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
