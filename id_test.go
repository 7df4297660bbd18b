package sema

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"testing"
)

// Lease IDs are the standard base32 encoding of 16 random bytes.
func TestEncodeIDMatchesBase32(t *testing.T) {
	enc := base32.StdEncoding.WithPadding(base32.NoPadding)
	for range 1000 {
		var b [16]byte
		rand.Read(b[:])
		want := enc.EncodeToString(b[:])
		var got [idLen]byte
		encodeIDTo(&got, binary.BigEndian.Uint64(b[:]), binary.BigEndian.Uint64(b[8:]))
		if string(got[:]) != want {
			t.Fatalf("encode %x = %s, want %s", b, got[:], want)
		}
	}
	if _, id := newLeaseID(); len(id) != 26 || ValidateID(id) != nil {
		t.Fatalf("newLeaseID() = %q", id)
	}
}

// The word-at-a-time checks agree with byte-by-byte ones: every byte value
// at every position of a word, and random words.
func TestWordChecks(t *testing.T) {
	printable := func(c byte) bool { return c >= 0x20 && c <= 0x7e }
	alnum := func(c byte) bool { return c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' }
	check := func(b [8]byte) {
		t.Helper()
		wantP, wantA := true, true
		for _, c := range b {
			wantP = wantP && printable(c)
			wantA = wantA && alnum(c)
		}
		w := load64(string(b[:]), 0)
		if printableASCII8(w) != wantP || alnum8(w) != wantA {
			t.Fatalf("%q: printable %v (want %v), alnum %v (want %v)", b[:], printableASCII8(w), wantP, alnum8(w), wantA)
		}
	}
	for pos := range 8 {
		for c := range 256 {
			for _, fill := range []byte{'a', 'Z', '0', '9', ' ', '~', 'z', 'A'} {
				var b [8]byte
				for i := range b {
					b[i] = fill
				}
				b[pos] = byte(c)
				check(b)
			}
		}
	}
	for range 100000 {
		var b [8]byte
		rand.Read(b[:])
		for i := range b {
			b[i] &= 0x7f // mostly ASCII, where the word checks do their work
		}
		check(b)
	}
}

// A bad byte anywhere — in a full word, in the tail, in the word the tail
// overlaps — is found, for every length up to 40.
func TestTextChecksEveryPosition(t *testing.T) {
	for n := 1; n <= 40; n++ {
		for pos := range n {
			b := make([]byte, n)
			for i := range b {
				b[i] = 'a'
			}
			if checkText(string(b)) != nil || ValidateID(string(b)) != nil {
				t.Fatalf("%q rejected", b)
			}
			b[pos] = 0x01
			if checkText(string(b)) == nil {
				t.Fatalf("checkText(%q) = nil", b)
			}
			b[pos] = '.'
			if ValidateID(string(b)) == nil {
				t.Fatalf("ValidateID(%q) = nil", b)
			}
		}
	}
}
