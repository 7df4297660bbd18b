package remote

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/sema-dev/sema"
)

// The request bodies of the hot path are written by hand: no reflection and
// one allocation (the body) per call. Fields follow internal/wire.

// appendAcquire appends the JSON of a wire.AcquireRequest.
func appendAcquire(b []byte, req *sema.Request, waitMs int64) []byte {
	b = append(b, `{"name":`...)
	b = appendString(b, req.Name)
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, req.Limit, 10)
	b = append(b, `,"weight":`...)
	b = strconv.AppendInt(b, req.Weight, 10)
	b = append(b, `,"ttl_ms":`...)
	b = strconv.AppendInt(b, ttlMillis(req.TTL), 10)
	if req.Owner != "" {
		b = append(b, `,"owner":`...)
		b = appendString(b, req.Owner)
	}
	b = append(b, `,"id":`...)
	b = appendString(b, req.ID)
	if waitMs > 0 {
		b = append(b, `,"wait_ms":`...)
		b = strconv.AppendInt(b, waitMs, 10)
	}
	if req.Host != "" {
		b = append(b, `,"host":`...)
		b = appendString(b, req.Host)
	}
	if req.PID != 0 {
		b = append(b, `,"pid":`...)
		b = strconv.AppendInt(b, int64(req.PID), 10)
	}
	return append(b, '}')
}

// appendRenew appends the JSON of a wire.RenewRequest.
func appendRenew(b []byte, name, id string, ttl time.Duration) []byte {
	b = append(b, `{"name":`...)
	b = appendString(b, name)
	b = append(b, `,"id":`...)
	b = appendString(b, id)
	b = append(b, `,"ttl_ms":`...)
	b = strconv.AppendInt(b, ttlMillis(ttl), 10)
	return append(b, '}')
}

// appendNameID appends {"name":…,"id":…} (a wire.ReleaseRequest or a
// wire.ForceReleaseRequest); an empty id is left out.
func appendNameID(b []byte, name, id string) []byte {
	b = append(b, `{"name":`...)
	b = appendString(b, name)
	if id != "" {
		b = append(b, `,"id":`...)
		b = appendString(b, id)
	}
	return append(b, '}')
}

// ttlMillis rounds up to whole milliseconds, so the server never expires a
// lease earlier than the client computed.
func ttlMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does; the server rejects such names anyway.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
