package file

import (
	"bytes"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

func sampleState() *state {
	now := time.Unix(1_700_000_000, 0).UnixNano()
	return &state{
		Name: "jobs/nightly ü", Limit: 3, Token: 42, Ticket: 9, Boot: [16]byte{1, 2, 3},
		Holders: []holderRec{
			{ID: "AAAA", Owner: "web-1:4242", Host: "web-1", PID: 4242, Token: 41, Weight: 2,
				Acquired: now, Renewed: now + 1, Expires: now + int64(time.Minute), Slot: 3, Nonce: 77},
			{Phantom: true, Slot: 5, Acquired: now, Renewed: now, Expires: now + int64(sema.MaxTTL)},
		},
		Waiters: []waiterRec{
			{Ticket: 8, ID: "BBBB", Owner: "o", Host: "h", PID: 1, Weight: 1, TTL: int64(time.Second), Since: now, Slot: 4, Nonce: 5},
			{Ticket: 9, ID: "CCCC", Weight: 3, TTL: int64(sema.MaxTTL), Since: now, Slot: 4, Nonce: 5},
		},
		Revoked: []revokedRec{{ID: "DDDD", Until: now}},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, st := range []*state{sampleState(), {Name: "x"}} {
		rec, err := appendRecord(nil, 7, st)
		if err != nil {
			t.Fatal(err)
		}
		h, got, err := decodeRecord(rec, nil)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if h.gen != 7 || int(h.length) != len(rec)-headerSize {
			t.Errorf("header %+v", h)
		}
		if !reflect.DeepEqual(normalize(got), normalize(st)) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, st)
		}
	}
}

// normalize maps empty slices to nil for comparison.
func normalize(s *state) *state {
	c := *s
	if len(c.Holders) == 0 {
		c.Holders = nil
	}
	if len(c.Waiters) == 0 {
		c.Waiters = nil
	}
	if len(c.Revoked) == 0 {
		c.Revoked = nil
	}
	return &c
}

func TestDecodeRejects(t *testing.T) {
	mutate := map[string]func(*state){
		"over limit": func(s *state) {
			s.Holders = append(s.Holders, holderRec{ID: "EEEE", Token: 40, Weight: 2, Slot: 1})
		},
		"token ahead":       func(s *state) { s.Holders[0].Token = 43 },
		"duplicate id":      func(s *state) { s.Waiters[0].ID = "AAAA" },
		"tickets unordered": func(s *state) { s.Waiters[0].Ticket = 9 },
		"ticket ahead":      func(s *state) { s.Ticket = 8 },
		"bad ttl":           func(s *state) { s.Waiters[1].TTL = 1 },
		"bad id":            func(s *state) { s.Holders[0].ID = "a/b" },
		"bad name":          func(s *state) { s.Name = "" },
		"control in owner":  func(s *state) { s.Holders[0].Owner = "a\nb" },
		"phantom weight":    func(s *state) { s.Holders[1].Weight = 1 },
		"slot range":        func(s *state) { s.Waiters[0].Slot = maxSlots },
	}
	for name, f := range mutate {
		st := sampleState()
		f(st)
		rec, err := appendRecord(nil, 1, st)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := decodeRecord(rec, nil); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: decoded without error (%v)", name, err)
		}
	}
	rec, _ := appendRecord(nil, 1, sampleState())
	for i := range rec {
		bad := bytes.Clone(rec)
		bad[i] ^= 0x40
		if _, _, err := decodeRecord(bad, nil); err == nil {
			t.Errorf("flipping byte %d went unnoticed", i)
		}
	}
	for n := range len(rec) {
		if _, _, err := decodeRecord(rec[:n], nil); err == nil {
			t.Errorf("truncation to %d bytes went unnoticed", n)
		}
	}
}

func TestParseHeader(t *testing.T) {
	rec, _ := appendRecord(nil, 4, sampleState())
	if _, k := parseHeader(rec); k != hdrValid {
		t.Errorf("valid header: kind %v", k)
	}
	for _, b := range [][]byte{nil, make([]byte, 10), make([]byte, headerSize)} {
		if _, k := parseHeader(b); k != hdrAbsent {
			t.Errorf("%d zero bytes: kind %v", len(b), k)
		}
	}
	if _, k := parseHeader([]byte("garbage garbage garbage garbage")); k != hdrBad {
		t.Errorf("garbage: kind %v", k)
	}
	v2 := bytes.Clone(rec)
	v2[4] = 2
	if _, k := parseHeader(v2); k != hdrUnsupported {
		t.Errorf("version 2: kind %v", k)
	}
}

func TestStateTooLarge(t *testing.T) {
	st := &state{Name: "big", Limit: sema.MaxLimit, Ticket: 1 << 40}
	owner := strings.Repeat("o", 255)
	for i := range 5000 {
		st.Waiters = append(st.Waiters, waiterRec{Ticket: uint64(i + 1), ID: "ID" + strings.Repeat("x", 60),
			Owner: owner, Host: owner, Weight: 1, TTL: int64(time.Second)})
	}
	if _, err := appendRecord(nil, 1, st); err == nil {
		t.Fatal("a state over 1 MiB was encoded")
	}
}

func FuzzDecodeRecord(f *testing.F) {
	for _, st := range []*state{sampleState(), {Name: "x"}, {Name: "a", Limit: 1, Token: 1,
		Holders: []holderRec{{ID: "i", Token: 1, Weight: 1}}}} {
		rec, _ := appendRecord(nil, 3, st)
		f.Add(rec)
		f.Add(rec[:len(rec)/2])
	}
	f.Add([]byte{})
	f.Add([]byte("sema\x01\x00\x00\x00"))
	f.Add(bytes.Repeat([]byte{0xff}, 64))
	f.Fuzz(func(t *testing.T, data []byte) {
		parseHeader(data)
		h, st, err := decodeRecord(data, nil)
		if err != nil {
			return
		}
		// Whatever decodes is a state a writer could have made: it encodes
		// back to the same bytes.
		rec, err := appendRecord(nil, h.gen, st)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(rec, data[:headerSize+int(h.length)]) {
			t.Fatalf("re-encoding differs")
		}
		if st.used() > st.Limit {
			t.Fatalf("decoded state over its limit")
		}
	})
}

// FuzzPayload fuzzes the payload decoder directly, past the checksum.
func FuzzPayload(f *testing.F) {
	f.Add(appendState(nil, sampleState()))
	f.Add(appendState(nil, &state{Name: "x"}))
	f.Fuzz(func(t *testing.T, p []byte) {
		st, err := decodeState(p, nil)
		if err != nil {
			return
		}
		if !bytes.Equal(appendState(nil, st), p) {
			t.Fatalf("re-encoding differs")
		}
	})
}

func TestStatePath(t *testing.T) {
	for _, name := range []string{"a", "../../etc/passwd", "a/b", strings.Repeat("é", 127)} {
		if got, want := statePath("/some/dir", name), filepath.Join("/some/dir", fileName(name)); got != want {
			t.Errorf("statePath(%q) = %q, want %q", name, got, want)
		}
	}
}
