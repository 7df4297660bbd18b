package store

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func sampleRecords() []record {
	return []record{
		{kind: kindGrant, name: "jobs/nightly", id: "abc123", owner: "host:42", host: "host", principal: "p1",
			pid: 42, weight: 2, limit: 3, token: 7, ttl: 15 * time.Second, acquired: time.Now().UnixNano()},
		{kind: kindGrant, name: "ünïcode name", id: "x", token: 1, weight: 1, limit: 1, ttl: 100 * time.Millisecond},
		{kind: kindEnd, name: "jobs/nightly", id: "abc123", reason: endExpire},
		{kind: kindTTL, name: "jobs/nightly", id: "abc123", ttl: time.Hour},
		{kind: kindMeta, token: 1 << 40, count: 3},
		{kind: kindFast, name: "hot", limit: 2, ttl: 15 * time.Second},
		{kind: kindUnfast, name: "hot"},
		{kind: kindReserve, token: 1 << 21},
		{kind: kindRevoke, name: "jobs/nightly", id: "abc123"},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range sampleRecords() {
		b := appendFrame(nil, &r)
		got, n, err := readFrame(b)
		if err != nil || n != len(b) || got != r {
			t.Errorf("round trip of %+v = %+v, %d, %v", r, got, n, err)
		}
		// Every truncation is torn, never a panic or a wrong record.
		for i := range len(b) {
			if _, _, err := readFrame(b[:i]); !errors.Is(err, errTorn) {
				t.Errorf("%d of %d bytes: %v, want errTorn", i, len(b), err)
			}
		}
		// Every single-bit flip is detected.
		for i := range len(b) * 8 {
			c := bytes.Clone(b)
			c[i/8] ^= 1 << (i % 8)
			if got, _, err := readFrame(c); err == nil && got != r {
				t.Errorf("bit %d flipped: decoded %+v without error", i, got)
			}
		}
	}
}

// FuzzReadFrame: arbitrary bytes never panic, and whatever decodes
// re-encodes to the same bytes.
func FuzzReadFrame(f *testing.F) {
	for _, r := range sampleRecords() {
		f.Add(appendFrame(nil, &r))
	}
	f.Add([]byte{})
	f.Add(make([]byte, 16))
	f.Add([]byte{5, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, n, err := readFrame(b)
		if err != nil {
			return
		}
		if again := appendFrame(nil, &r); !bytes.Equal(again, b[:n]) {
			t.Fatalf("decoded %+v from %x, re-encodes to %x", r, b[:n], again)
		}
	})
}

// FuzzDecodePayload skips the checksum: the decoder alone must reject
// anything malformed without panicking.
func FuzzDecodePayload(f *testing.F) {
	for _, r := range sampleRecords() {
		f.Add(appendFrame(nil, &r)[frameHeader:])
	}
	f.Add([]byte{kindGrant, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, p []byte) {
		r, err := decodePayload(p)
		if err == nil && r.kind == kindGrant && (r.weight < 1 || r.weight > r.limit || r.name == "") {
			t.Fatalf("accepted an invalid grant %+v", r)
		}
	})
}
