package wire

import (
	"bytes"
	"strconv"
	"time"
)

// ParseLease decodes the common answer {"lease":{...}} without reflection.
// It handles exactly what the server writes on success: a flat object of
// strings without escapes, integers, one float and RFC 3339 times. On
// anything else (an error body, escapes, an unknown field, odd spacing…)
// it reports ok == false and the caller falls back to encoding/json, so it
// can only be faster, never different (FuzzParseLease checks that).
//
// The lease is decoded into *out. The name, ID and owner that *out holds on
// entry are hints: a decoded string equal to one of them reuses it instead
// of allocating (the server answers with the caller's own strings). *out is
// undefined when ok is false and zero (but for the hints) when empty.
func ParseLease(body []byte, out *Lease) (empty, ok bool) {
	hints := [3]string{out.Name, out.ID, out.Owner}
	*out = Lease{}
	p := bytes.TrimLeft(body, " \t\r\n")
	p = bytes.TrimRight(p, " \t\r\n")
	if string(p) == "{}" {
		return true, true
	}
	const prefix = `{"lease":{`
	if !bytes.HasPrefix(p, []byte(prefix)) || !bytes.HasSuffix(p, []byte("}}")) {
		return false, false
	}
	p = p[len(prefix) : len(p)-2]
	seen := 0
	for len(p) > 0 {
		key, rest, ok := plainString(p)
		if !ok || len(rest) == 0 || rest[0] != ':' {
			return false, false
		}
		p = rest[1:]
		var bit int
		switch string(key) {
		case "name", "id", "owner", "acquired_at", "expires_at":
			var s []byte
			quoted := p
			if s, p, ok = plainString(p); !ok {
				return false, false
			}
			switch string(key) {
			case "name":
				out.Name, bit = hinted(s, &hints), 1
			case "id":
				out.ID, bit = hinted(s, &hints), 2
			case "owner":
				out.Owner, bit = hinted(s, &hints), 4
			case "acquired_at", "expires_at":
				var t time.Time // exactly as encoding/json parses it
				if err := t.UnmarshalJSON(quoted[:len(s)+2]); err != nil {
					return false, false
				}
				if key[0] == 'a' {
					out.AcquiredAt, bit = t, 8
				} else {
					out.ExpiresAt, bit = t, 16
				}
			}
		case "token", "weight", "limit", "ttl_ms":
			var n []byte
			if n, p, ok = plainInt(p); !ok {
				return false, false
			}
			switch string(key) {
			case "token":
				v, err := strconv.ParseUint(string(n), 10, 64)
				if err != nil {
					return false, false
				}
				out.Token, bit = v, 32
			default:
				v, err := strconv.ParseInt(string(n), 10, 64)
				if err != nil {
					return false, false
				}
				switch key[0] {
				case 'w':
					out.Weight, bit = v, 64
				case 'l':
					out.Limit, bit = v, 128
				default:
					out.TTLMillis, bit = v, 256
				}
			}
		case "waited_ms":
			var n []byte
			n, p = fastNumber(p)
			v, err := strconv.ParseFloat(string(n), 64)
			if err != nil || !jsonNumber(n) {
				return false, false
			}
			out.WaitedMillis, bit = v, 512
		default:
			return false, false
		}
		if seen&bit != 0 { // a repeated key: let encoding/json decide
			return false, false
		}
		seen |= bit
		if len(p) > 0 {
			if p[0] != ',' || len(p) == 1 {
				return false, false
			}
			p = p[1:]
		}
	}
	return false, true
}

// hinted returns s as a string, one of hints if equal (without allocating).
func hinted(s []byte, hints *[3]string) string {
	for _, h := range hints {
		if string(s) == h {
			return h
		}
	}
	return string(s)
}

// fastNumber splits off the characters a JSON number may contain.
func fastNumber(p []byte) (n, rest []byte) {
	i := 0
	for i < len(p) && (p[i] >= '0' && p[i] <= '9' || p[i] == '-' || p[i] == '+' || p[i] == '.' || p[i] == 'e' || p[i] == 'E') {
		i++
	}
	return p[:i], p[i:]
}

// jsonNumber reports whether n is a number in JSON's grammar (which is
// stricter than strconv's: no leading zeros, no "1.", no ".5").
func jsonNumber(n []byte) bool {
	i := 0
	if i < len(n) && n[i] == '-' {
		i++
	}
	switch {
	case i < len(n) && n[i] == '0':
		i++
	case i < len(n) && n[i] >= '1' && n[i] <= '9':
		for i < len(n) && n[i] >= '0' && n[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(n) && n[i] == '.' {
		i++
		if i == len(n) || n[i] < '0' || n[i] > '9' {
			return false
		}
		for i < len(n) && n[i] >= '0' && n[i] <= '9' {
			i++
		}
	}
	if i < len(n) && (n[i] == 'e' || n[i] == 'E') {
		i++
		if i < len(n) && (n[i] == '+' || n[i] == '-') {
			i++
		}
		if i == len(n) || n[i] < '0' || n[i] > '9' {
			return false
		}
		for i < len(n) && n[i] >= '0' && n[i] <= '9' {
			i++
		}
	}
	return i == len(n)
}
