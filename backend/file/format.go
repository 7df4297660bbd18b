package file

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/sema-dev/sema"
)

// A state file holds one record at offset 0, rewritten in place by each
// step under the state lock. A record that fails its checksum (a write
// torn by a crash, or damage) is repaired, never trusted: see repair. A
// record is a 24-byte header and a payload:
//
//	0  magic "sema"
//	4  version uint16 (formatVersion)
//	6  flags   uint16 (0)
//	8  gen     uint64
//	16 length  uint32 (payload bytes)
//	20 crc     uint32 (CRC-32C of bytes 4..20 and the payload)
//
// All integers are little-endian. The payload is the encoded state (see
// appendState); strings are a length byte and UTF-8 bytes.
const (
	magic         = "sema"
	formatVersion = 1
	headerSize    = 24
	maxPayload    = 1<<20 - headerSize
)

// castagnoli is made on first use: building its tables costs more than
// starting a small process, and most runs of the sema command that link
// this package never read a state file.
var castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// errCorrupt marks a record that fails validation.
var errCorrupt = errors.New("corrupt record")

// header is a decoded record header.
type header struct {
	gen    uint64
	length uint32
	crc    uint32
}

// headerKind classifies the 24 bytes at the start of a slot.
type headerKind int

const (
	hdrAbsent      headerKind = iota // never written: short read or all zero
	hdrValid                         // magic and version match; payload unchecked
	hdrBad                           // garbage
	hdrUnsupported                   // magic matches, another format version
)

func parseHeader(b []byte) (header, headerKind) {
	if len(b) < headerSize || allZero(b[:headerSize]) {
		if len(b) == 0 || allZero(b) {
			return header{}, hdrAbsent
		}
		return header{}, hdrBad
	}
	if string(b[:4]) != magic {
		return header{}, hdrBad
	}
	if binary.LittleEndian.Uint16(b[4:]) != formatVersion {
		return header{}, hdrUnsupported
	}
	h := header{
		gen:    binary.LittleEndian.Uint64(b[8:]),
		length: binary.LittleEndian.Uint32(b[16:]),
		crc:    binary.LittleEndian.Uint32(b[20:]),
	}
	if binary.LittleEndian.Uint16(b[6:]) != 0 || h.length > maxPayload {
		return header{}, hdrBad
	}
	return h, hdrValid
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// checksum is the CRC of a record: header bytes 4..20, then the payload.
func checksum(hdr, payload []byte) uint32 {
	t := castagnoli()
	return crc32.Update(crc32.Checksum(hdr[4:20], t), t, payload)
}

// appendRecord appends the record of st with generation gen to buf.
func appendRecord(buf []byte, gen uint64, st *state) ([]byte, error) {
	start := len(buf)
	buf = append(buf, magic...)
	buf = binary.LittleEndian.AppendUint16(buf, formatVersion)
	buf = binary.LittleEndian.AppendUint16(buf, 0)
	buf = binary.LittleEndian.AppendUint64(buf, gen)
	buf = append(buf, make([]byte, 8)...) // length and crc, below
	buf = appendState(buf, st)
	n := len(buf) - start - headerSize
	if n > maxPayload {
		return buf[:start], fmt.Errorf("state of %q is %d bytes, more than the %d a state file holds (%d holders, %d waiters)",
			st.Name, n, maxPayload, len(st.Holders), len(st.Waiters))
	}
	rec := buf[start:]
	binary.LittleEndian.PutUint32(rec[16:], uint32(n))
	binary.LittleEndian.PutUint32(rec[20:], checksum(rec, rec[headerSize:]))
	return buf, nil
}

// decodeRecord checks and decodes a whole record (header and payload),
// with the strings in kept from the last one (nil: none).
func decodeRecord(rec []byte, in *interner) (header, *state, error) {
	h, kind := parseHeader(rec)
	if kind != hdrValid {
		return h, nil, fmt.Errorf("%w: bad header", errCorrupt)
	}
	if uint64(len(rec)) < headerSize+uint64(h.length) {
		return h, nil, fmt.Errorf("%w: truncated", errCorrupt)
	}
	payload := rec[headerSize : headerSize+int(h.length)]
	if checksum(rec, payload) != h.crc {
		return h, nil, fmt.Errorf("%w: checksum mismatch", errCorrupt)
	}
	st, err := decodeState(payload, in)
	return h, st, err
}

func appendStr(b []byte, s string) []byte {
	b = append(b, byte(len(s)))
	return append(b, s...)
}

func appendU32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }
func appendI64(b []byte, v int64) []byte  { return binary.LittleEndian.AppendUint64(b, uint64(v)) }

// appendState encodes st. Every string is at most 255 bytes (validated on
// the way in).
func appendState(b []byte, st *state) []byte {
	b = appendStr(b, st.Name)
	b = appendI64(b, st.Limit)
	b = appendU64(b, st.Token)
	b = appendU64(b, st.Ticket)
	b = append(b, st.Boot[:]...)
	b = appendU32(b, uint32(len(st.Holders)))
	for i := range st.Holders {
		h := &st.Holders[i]
		var flags byte
		if h.Phantom {
			flags = 1
		}
		b = append(b, flags)
		b = appendStr(b, h.ID)
		b = appendStr(b, h.Owner)
		b = appendStr(b, h.Host)
		b = appendU32(b, h.PID)
		b = appendU64(b, h.Token)
		b = appendI64(b, h.Weight)
		b = appendI64(b, h.Acquired)
		b = appendI64(b, h.Renewed)
		b = appendI64(b, h.Expires)
		b = appendU32(b, h.Slot)
		b = appendU64(b, h.Nonce)
	}
	b = appendU32(b, uint32(len(st.Waiters)))
	for i := range st.Waiters {
		w := &st.Waiters[i]
		b = appendU64(b, w.Ticket)
		b = appendStr(b, w.ID)
		b = appendStr(b, w.Owner)
		b = appendStr(b, w.Host)
		b = appendU32(b, w.PID)
		b = appendI64(b, w.Weight)
		b = appendI64(b, w.TTL)
		b = appendI64(b, w.Since)
		b = appendU32(b, w.Slot)
		b = appendU64(b, w.Nonce)
	}
	b = appendU32(b, uint32(len(st.Revoked)))
	for _, r := range st.Revoked {
		b = appendStr(b, r.ID)
		b = appendI64(b, r.Until)
	}
	return b
}

// Minimum encoded sizes, to bound counts before allocating.
const (
	minHolder  = 1 + 3 + 4 + 8*5 + 4 + 8
	minWaiter  = 8 + 3 + 4 + 8*3 + 4 + 8
	minRevoked = 1 + 8
)

// reader decodes a payload; the first error sticks and later reads return
// zero values, so decodeState checks once per entry.
type reader struct {
	b   []byte
	err error
	in  *interner // nil: every string is new
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{errCorrupt}, args...)...)
	}
}

func (r *reader) take(n int) []byte {
	if r.err != nil || n > len(r.b) {
		r.fail("truncated")
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u8() byte {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (r *reader) i64() int64 { return int64(r.u64()) }

// text reads a string of printable UTF-8 (owner and host labels).
func (r *reader) text(what string) string { return r.checked(what) }

// id reads a lease ID.
func (r *reader) id() string { return r.checked("") }

// checked reads a length-prefixed string and checks it as a lease ID, or
// as the label what; the interner spares the check (and the allocation)
// of a string it has checked already.
func (r *reader) checked(what string) string {
	b := r.take(int(r.u8()))
	if r.err != nil {
		return ""
	}
	var t *strTable
	if r.in != nil {
		t = &r.in.labels
		if what == "" {
			t = &r.in.ids
		}
		if s, ok := t.get(b); ok {
			return s
		}
	}
	s := string(b)
	switch {
	case what == "" && sema.ValidateID(s) != nil:
		r.fail("bad lease id %q", s)
	case what != "" && !printable(s):
		r.fail("%s %q is not printable UTF-8", what, s)
	case t != nil:
		t.keep(s)
	}
	return s
}

// count reads an entry count and checks it against the bytes left.
func (r *reader) count(min int) int {
	n := r.u32()
	if r.err == nil && uint64(n)*uint64(min) > uint64(len(r.b)) {
		r.fail("count %d exceeds the payload", n)
		return 0
	}
	return int(n)
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, c := range s {
		if unicode.IsControl(c) || c == utf8.RuneError {
			return false
		}
	}
	return true
}
