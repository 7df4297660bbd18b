package server

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/wire"
)

// leaseOf converts a grant to its wire form.
func leaseOf(g sema.Grant, ttl time.Duration) wire.Lease {
	return wire.Lease{
		Name: g.Name, ID: g.ID, Token: g.Token, Owner: g.Owner, Weight: g.Weight, Limit: g.Limit,
		AcquiredAt: g.AcquiredAt, ExpiresAt: g.ExpiresAt, TTLMillis: ttl.Milliseconds(),
		WaitedMillis: float64(g.Waited.Microseconds()) / 1000,
	}
}

// appendLeaseEnvelope appends {"lease":{…}} to b without reflection: the
// hot path of acquire and renew. It produces what encoding/json decodes to
// the same wire.Envelope (checked by a fuzz test).
func appendLeaseEnvelope(b []byte, l *wire.Lease) []byte {
	b = append(b, `{"lease":{"name":`...)
	b = appendString(b, l.Name)
	b = append(b, `,"id":`...)
	b = appendString(b, l.ID)
	b = append(b, `,"token":`...)
	b = strconv.AppendUint(b, l.Token, 10)
	b = append(b, `,"owner":`...)
	b = appendString(b, l.Owner)
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

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// as with encoding/json.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}
