package store

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadSnapshot: no snapshot file, however damaged, makes recovery
// panic; what it accepts holds only valid grants, and the token counter
// continues at or above every token it holds.
func FuzzReadSnapshot(f *testing.F) {
	head := binary.LittleEndian.AppendUint64([]byte(snapMagic), 1)
	snap := appendFrame(head, &record{kind: kindMeta, token: 9, count: 2})
	for _, r := range sampleRecords() {
		if r.kind == kindGrant {
			snap = appendFrame(snap, &r)
		}
	}
	f.Add(snap)
	f.Add(snap[:len(snap)-3])
	f.Add(appendFrame(head, &record{kind: kindMeta}))
	f.Add(head)
	f.Fuzz(func(t *testing.T, data []byte) {
		st := &recovered{leases: map[string]*record{}, fast: map[string]*record{}}
		if err := readSnapshot(data, 1, st); err != nil {
			return
		}
		for k, r := range st.leases {
			if r.kind != kindGrant || r.weight < 1 || r.weight > r.limit || r.name == "" || r.token > st.token {
				t.Fatalf("readSnapshot accepted %q: %+v (token counter %d)", k, r, st.token)
			}
		}
	})
}

// FuzzReadReserve: the reservation mark is read back exactly as written,
// and any other content is refused as corrupt.
func FuzzReadReserve(f *testing.F) {
	dir := f.TempDir()
	m := reserveMark{dir: dir}
	if err := m.record(1 << 40); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(dir, reserveName))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add([]byte{})
	work := f.TempDir() // one per fuzzing process: the file is rewritten each time
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(filepath.Join(work, reserveName), b, 0o600); err != nil {
			t.Fatal(err)
		}
		mark, err := readReserve(work)
		if err != nil {
			if !errors.Is(err, errCorrupt) {
				t.Fatalf("readReserve(%x): %v is not corruption", b, err)
			}
			return
		}
		want := binary.LittleEndian.AppendUint64([]byte(reserveMagic), mark)
		want = binary.LittleEndian.AppendUint32(want, crc32.Checksum(want, castagnoli()))
		if string(want) != string(b) {
			t.Fatalf("readReserve(%x) = %d, which is written as %x", b, mark, want)
		}
	})
}
