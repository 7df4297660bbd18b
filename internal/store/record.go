package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"time"

	"github.com/sema-dev/sema"
)

// Record kinds of the write-ahead log and of snapshots.
const (
	kindGrant byte = 1 // a lease was granted (or restored by a snapshot)
	kindEnd   byte = 2 // a lease ended: released, expired, force-released, given back
	kindTTL   byte = 3 // a lease's TTL grew
	kindMeta  byte = 4 // snapshot header: token counter, lease count
	// kindFast: from now on, handoffs on name may be answered before
	// their grant is on disk; recovery fences the name for ttl.
	kindFast    byte = 5
	kindUnfast  byte = 6 // name is idle again, every grant before is on disk
	kindReserve byte = 7 // tokens up to this one may be handed out before they are on disk
	// kindRevoke: a lease was force-released while its permits stay taken
	// until it ends; its holder may no longer renew it.
	kindRevoke byte = 8
)

// End reasons, recorded for the operator's benefit only.
const (
	endRelease byte = iota + 1
	endExpire
	endForce
	endGiveBack
)

const (
	frameHeader = 8    // uint32 length of payload, uint32 CRC-32C of payload
	maxPayload  = 4096 // far above the largest valid record (strings are bounded)
	maxPrincLen = 64   // bytes of a principal (a token fingerprint)
)

// castagnoli is made on first use: building its tables at program start
// would cost every run of the sema binary, not only sema serve.
var castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// errTorn marks a frame cut short or failing its checksum: the tail of an
// interrupted write, or corruption, depending on where it is.
var errTorn = errors.New("torn or corrupt frame")

// record is the decoded form of every kind. Unused fields are zero.
type record struct {
	kind      byte
	name      string
	id        string
	owner     string
	host      string
	principal string
	pid       int
	weight    int64
	limit     int64
	token     uint64
	ttl       time.Duration
	acquired  int64 // wall clock, Unix nanoseconds
	reason    byte
	count     uint64 // kindMeta: number of grant records that follow
	odd       string // decoded, not written: why this record is honoured with a warning
}

// appendFrame appends the framed encoding of r to dst.
func appendFrame(dst []byte, r *record) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	dst = append(dst, r.kind)
	switch r.kind {
	case kindGrant:
		dst = appendString(dst, r.name)
		dst = appendString(dst, r.id)
		dst = appendString(dst, r.owner)
		dst = appendString(dst, r.host)
		dst = appendString(dst, r.principal)
		dst = binary.AppendUvarint(dst, uint64(r.pid))
		dst = binary.AppendUvarint(dst, uint64(r.weight))
		dst = binary.AppendUvarint(dst, uint64(r.limit))
		dst = binary.AppendUvarint(dst, r.token)
		dst = binary.AppendUvarint(dst, uint64(r.ttl/time.Millisecond))
		dst = binary.AppendVarint(dst, r.acquired)
	case kindEnd:
		dst = appendString(dst, r.name)
		dst = appendString(dst, r.id)
		dst = append(dst, r.reason)
	case kindRevoke:
		dst = appendString(dst, r.name)
		dst = appendString(dst, r.id)
	case kindTTL:
		dst = appendString(dst, r.name)
		dst = appendString(dst, r.id)
		dst = binary.AppendUvarint(dst, uint64(r.ttl/time.Millisecond))
	case kindMeta:
		dst = binary.AppendUvarint(dst, r.token)
		dst = binary.AppendUvarint(dst, r.count)
	case kindFast:
		dst = appendString(dst, r.name)
		dst = binary.AppendUvarint(dst, uint64(r.limit))
		dst = binary.AppendUvarint(dst, uint64(r.ttl/time.Millisecond))
	case kindUnfast:
		dst = appendString(dst, r.name)
	case kindReserve:
		dst = binary.AppendUvarint(dst, r.token)
	}
	payload := dst[start+frameHeader:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(payload, castagnoli()))
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// readFrame decodes the frame at the start of b and returns it with the
// number of bytes it used. A frame that is cut short or fails its checksum
// is errTorn; a frame whose checksum holds but whose content is invalid is
// another error (it was written that way: corruption, never a torn write).
func readFrame(b []byte) (record, int, error) {
	if len(b) < frameHeader {
		return record{}, 0, errTorn
	}
	n := binary.LittleEndian.Uint32(b)
	if n == 0 || n > maxPayload || int(n) > len(b)-frameHeader {
		return record{}, 0, errTorn
	}
	payload := b[frameHeader : frameHeader+int(n)]
	if crc32.Checksum(payload, castagnoli()) != binary.LittleEndian.Uint32(b[4:]) {
		return record{}, 0, errTorn
	}
	r, err := decodePayload(payload)
	if err != nil {
		return record{}, 0, err
	}
	return r, frameHeader + int(n), nil
}

// decoder reads fields from a payload; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("store: bad record: %s", what)
	}
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str(what string, max int) string {
	n := d.uvarint(what)
	if d.err != nil {
		return ""
	}
	if n > uint64(max) || n > uint64(len(d.b)) {
		d.fail(what + " length")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) byte1(what string) byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail(what)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// decodePayload decodes and checks one record payload. What recovery
// could not honour safely — bytes that do not parse, a limit, weight or TTL
// out of range — is corruption, an error. A well-formed record with an odd
// value that was accepted when it was written (a label or a name that the
// validation of today refuses, a pid out of range) is honoured: the record
// comes back with odd saying what, for a warning (a pid out of range is
// then not kept: it is informational, see pidOf).
func decodePayload(p []byte) (record, error) {
	d := decoder{b: p}
	r := record{kind: d.byte1("kind")}
	switch r.kind {
	case kindGrant:
		r.name = d.str("name", sema.MaxNameLen)
		r.id = d.str("id", sema.MaxIDLen)
		r.owner = d.str("owner", sema.MaxOwnerLen)
		r.host = d.str("host", sema.MaxOwnerLen)
		r.principal = d.str("principal", maxPrincLen)
		pid := d.uvarint("pid")
		weight := d.uvarint("weight")
		limit := d.uvarint("limit")
		r.token = d.uvarint("token")
		ttl := d.uvarint("ttl")
		r.acquired = d.varint("acquired")
		if d.err == nil && (r.name == "" || r.id == "" ||
			limit < 1 || limit > sema.MaxLimit || weight < 1 || weight > limit || ttl > maxTTLMillis) {
			d.fail("grant field out of range")
		}
		r.pid, r.weight, r.limit = int(pid), int64(weight), int64(limit)
		r.ttl = time.Duration(ttl) * time.Millisecond
		if pid > sema.MaxPID {
			r.odd = fmt.Sprintf("pid %d out of range (not kept)", pid)
		} else if d.err == nil {
			req := sema.Request{Name: r.name, ID: r.id, Owner: r.owner, Limit: r.limit, Weight: r.weight,
				TTL: r.ttl, Host: r.host, PID: r.pid}
			if err := req.Validate(); err != nil {
				r.odd = err.Error()
			} else if r.token == 0 {
				r.odd = "token 0"
			}
		}
	case kindEnd:
		r.name = d.str("name", sema.MaxNameLen)
		r.id = d.str("id", sema.MaxIDLen)
		r.reason = d.byte1("reason")
	case kindRevoke:
		r.name = d.str("name", sema.MaxNameLen)
		r.id = d.str("id", sema.MaxIDLen)
	case kindTTL:
		r.name = d.str("name", sema.MaxNameLen)
		r.id = d.str("id", sema.MaxIDLen)
		ttl := d.uvarint("ttl")
		if d.err == nil && ttl > maxTTLMillis {
			d.fail("ttl out of range")
		}
		r.ttl = time.Duration(ttl) * time.Millisecond
		if err := sema.ValidateTTL(r.ttl); d.err == nil && err != nil {
			r.odd = err.Error()
		}
	case kindMeta:
		r.token = d.uvarint("token")
		r.count = d.uvarint("count")
	case kindFast:
		r.name = d.str("name", sema.MaxNameLen)
		limit := d.uvarint("limit")
		ttl := d.uvarint("ttl")
		if d.err == nil && (limit < 1 || limit > sema.MaxLimit || ttl > maxTTLMillis) {
			d.fail("fast record out of range")
		}
		r.limit, r.ttl = int64(limit), time.Duration(ttl)*time.Millisecond
		if err := errors.Join(sema.ValidateName(r.name), sema.ValidateTTL(r.ttl)); d.err == nil && err != nil {
			r.odd = err.Error()
		}
	case kindUnfast:
		r.name = d.str("name", sema.MaxNameLen)
	case kindReserve:
		r.token = d.uvarint("token")
	default:
		d.fail(fmt.Sprintf("unknown kind %d", r.kind))
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return record{}, d.err
	}
	return r, nil
}

// pidOf is the pid a lease keeps of its grant record: 0 if out of range.
func pidOf(r *record) int32 {
	if r.pid < 0 || r.pid > sema.MaxPID {
		return 0
	}
	return int32(r.pid)
}

// maxTTLMillis is the largest TTL a record may carry, in its unit.
const maxTTLMillis = uint64(sema.MaxTTL / time.Millisecond)
