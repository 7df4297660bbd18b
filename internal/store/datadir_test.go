package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

// Data directories as a crash or damage leaves them, written by hand:
// several log segments after a snapshot, segments a rotation left empty,
// files damaged or missing, records that contradict each other.

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
