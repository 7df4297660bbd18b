package wire

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// The JSON of the calls every lock takes — acquire, renew, release and
// their lease answers — is written by hand here, without reflection,
// for the server and its Go client alike. Each encoder produces what
// encoding/json decodes to the same value (the fuzz tests check it); the
// other messages go through encoding/json.

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// as with encoding/json.
func AppendString(b []byte, s string) []byte {
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

// Append appends the JSON of r. Fields whose zero value means the default
// are left out when zero, as their omitempty tags say.
func (r *AcquireRequest) Append(b []byte) []byte {
	b = append(b, `{"name":`...)
	b = AppendString(b, r.Name)
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, r.Limit, 10)
	b = append(b, `,"weight":`...)
	b = strconv.AppendInt(b, r.Weight, 10)
	b = append(b, `,"ttl_ms":`...)
	b = strconv.AppendInt(b, r.TTLMillis, 10)
	if r.Owner != "" {
		b = append(b, `,"owner":`...)
		b = AppendString(b, r.Owner)
	}
	if r.ID != "" {
		b = append(b, `,"id":`...)
		b = AppendString(b, r.ID)
	}
	if r.WaitMillis != 0 {
		b = append(b, `,"wait_ms":`...)
		b = strconv.AppendInt(b, r.WaitMillis, 10)
	}
	if r.Host != "" {
		b = append(b, `,"host":`...)
		b = AppendString(b, r.Host)
	}
	if r.PID != 0 {
		b = append(b, `,"pid":`...)
		b = strconv.AppendInt(b, int64(r.PID), 10)
	}
	return append(b, '}')
}

// Append appends the JSON of r.
func (r *RenewRequest) Append(b []byte) []byte {
	b = appendNameID(b, r.Name, r.ID)
	b = append(b[:len(b)-1], `,"ttl_ms":`...)
	b = strconv.AppendInt(b, r.TTLMillis, 10)
	return append(b, '}')
}

// Append appends the JSON of r.
func (r *ReleaseRequest) Append(b []byte) []byte { return appendNameID(b, r.Name, r.ID) }

// Append appends the JSON of r; an empty ID and a false Now are left out.
func (r *ForceReleaseRequest) Append(b []byte) []byte {
	if r.ID == "" {
		b = append(b, `{"name":`...)
		b = AppendString(b, r.Name)
		b = append(b, '}')
	} else {
		b = appendNameID(b, r.Name, r.ID)
	}
	if r.Now {
		b = append(b[:len(b)-1], `,"now":true}`...)
	}
	if r.By != "" {
		b = append(b[:len(b)-1], `,"by":`...)
		b = append(AppendString(b, r.By), '}')
	}
	return b
}

func appendNameID(b []byte, name, id string) []byte {
	b = append(b, `{"name":`...)
	b = AppendString(b, name)
	b = append(b, `,"id":`...)
	b = AppendString(b, id)
	return append(b, '}')
}

// AppendLease appends the answer {"lease":{…}} and a newline. A waited
// time that is not a finite, non-negative number is written as 0.
func AppendLease(b []byte, l *Lease) []byte {
	b = append(b, `{"lease":{"name":`...)
	b = AppendString(b, l.Name)
	b = append(b, `,"id":`...)
	b = AppendString(b, l.ID)
	b = append(b, `,"token":`...)
	b = strconv.AppendUint(b, l.Token, 10)
	b = append(b, `,"owner":`...)
	b = AppendString(b, l.Owner)
	b = append(b, `,"weight":`...)
	b = strconv.AppendInt(b, l.Weight, 10)
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, l.Limit, 10)
	b = append(b, `,"acquired_at":`...)
	b = appendTime(b, l.AcquiredAt)
	b = append(b, `,"expires_at":`...)
	b = appendTime(b, l.ExpiresAt)
	b = append(b, `,"ttl_ms":`...)
	b = strconv.AppendInt(b, l.TTLMillis, 10)
	b = append(b, `,"waited_ms":`...)
	w := l.WaitedMillis
	if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
		w = 0
	}
	b = strconv.AppendFloat(b, w, 'f', -1, 64)
	return append(b, "}}\n"...)
}

func appendTime(b []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y > 9999 {
		out, _ := json.Marshal(time.Time{}) // unreachable for real clocks
		return append(b, out...)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}
