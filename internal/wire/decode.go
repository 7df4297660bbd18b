package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/sema-dev/sema"
)

// ErrMalformed marks a body that is not one JSON object of the expected
// shape: bad syntax, a second value, an unknown field, a wrong type.
var ErrMalformed = errors.New("malformed JSON body")

// Decode decodes b, one whole request body, into v: exactly one JSON
// object, unknown fields refused. An error wraps ErrMalformed and
// sema.ErrInvalidArgument.
//
// The requests of the calls every lock takes (*AcquireRequest,
// *RenewRequest, *ReleaseRequest) are decoded without reflection when
// they have the plain shape clients send: one flat object of known
// lowercase keys, each at most once, strings without escapes, integers.
// Anything else (escapes, other key spellings, null, floats…) goes to
// encoding/json, so the fast path can only be faster, never different: it
// accepts a subset of what encoding/json accepts, with the same result
// (FuzzDecode checks that).
func Decode(b []byte, v any) error {
	switch in := v.(type) {
	case *AcquireRequest:
		if fastAcquire(b, in) {
			return nil
		}
	case *RenewRequest:
		if fastRenew(b, in) {
			return nil
		}
	case *ReleaseRequest:
		if fastRelease(b, in) {
			return nil
		}
	}
	return decodeStrict(b, v)
}

// decodeStrict is Decode by encoding/json alone.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("data after the JSON object")
			if terr != nil && !errors.As(terr, new(*json.SyntaxError)) {
				err = terr
			}
		}
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("empty body")
	}
	return fmt.Errorf("%w: %w: %s", ErrMalformed, sema.ErrInvalidArgument, err.Error())
}

// fastObject calls field for each key of the flat object in p, with the
// raw value (a string's contents without quotes, or a number's text). It
// fails on anything but the plain shape described above.
func fastObject(p []byte, field func(key, val []byte, str bool) bool) bool {
	p = skipSpace(p)
	if len(p) == 0 || p[0] != '{' {
		return false
	}
	p = skipSpace(p[1:])
	if len(p) > 0 && p[0] == '}' {
		return len(skipSpace(p[1:])) == 0
	}
	for {
		key, rest, ok := plainString(p)
		if !ok {
			return false
		}
		p = skipSpace(rest)
		if len(p) == 0 || p[0] != ':' {
			return false
		}
		p = skipSpace(p[1:])
		var val []byte
		str := len(p) > 0 && p[0] == '"'
		if str {
			if val, p, ok = plainString(p); !ok {
				return false
			}
		} else {
			if val, p, ok = plainInt(p); !ok {
				return false
			}
		}
		if !field(key, val, str) {
			return false
		}
		p = skipSpace(p)
		if len(p) == 0 {
			return false
		}
		switch p[0] {
		case ',':
			p = skipSpace(p[1:])
		case '}':
			return len(skipSpace(p[1:])) == 0
		default:
			return false
		}
	}
}

func skipSpace(p []byte) []byte {
	for len(p) > 0 && (p[0] == ' ' || p[0] == '\t' || p[0] == '\n' || p[0] == '\r') {
		p = p[1:]
	}
	return p
}

// plainString reads a JSON string without escapes or control characters,
// of valid UTF-8 (so that encoding/json would decode it unchanged).
func plainString(p []byte) (s, rest []byte, ok bool) {
	if len(p) == 0 || p[0] != '"' {
		return nil, nil, false
	}
	ascii := true
	for i := 1; i < len(p); i++ {
		switch c := p[i]; {
		case c == '"':
			s = p[1:i]
			if !ascii && !utf8.Valid(s) {
				return nil, nil, false
			}
			return s, p[i+1:], true
		case c == '\\' || c < 0x20:
			return nil, nil, false
		case c >= 0x80:
			ascii = false
		}
	}
	return nil, nil, false
}

// plainInt reads a JSON integer (no fraction or exponent).
func plainInt(p []byte) (n, rest []byte, ok bool) {
	i := 0
	if i < len(p) && p[i] == '-' {
		i++
	}
	start := i
	for i < len(p) && p[i] >= '0' && p[i] <= '9' {
		i++
	}
	if i == start || (p[start] == '0' && i > start+1) {
		return nil, nil, false
	}
	if i < len(p) && (p[i] == '.' || p[i] == 'e' || p[i] == 'E') {
		return nil, nil, false
	}
	return p[:i], p[i:], true
}

// fastInt parses an integer field into *dst, once.
func fastInt(dst *int64, val []byte, str bool, seen *uint, bit uint) bool {
	if str || *seen&bit != 0 {
		return false
	}
	*seen |= bit
	n, err := strconv.ParseInt(string(val), 10, 64)
	*dst = n
	return err == nil
}

// fastStr sets a string field, once.
func fastStr(dst *string, val []byte, str bool, seen *uint, bit uint) bool {
	if !str || *seen&bit != 0 {
		return false
	}
	*seen |= bit
	*dst = string(val)
	return true
}

// fastInto decodes the object p into a fresh T, one field at a time, and
// stores it in dst only if all of p decodes.
func fastInto[T any](p []byte, dst *T, field func(in *T, seen *uint, key, val []byte, str bool) bool) bool {
	var in T
	var seen uint
	if !fastObject(p, func(key, val []byte, str bool) bool { return field(&in, &seen, key, val, str) }) {
		return false
	}
	*dst = in
	return true
}

func fastAcquire(p []byte, dst *AcquireRequest) bool {
	return fastInto(p, dst, func(in *AcquireRequest, seen *uint, key, val []byte, str bool) bool {
		switch string(key) {
		case "name":
			return fastStr(&in.Name, val, str, seen, 1)
		case "id":
			return fastStr(&in.ID, val, str, seen, 2)
		case "owner":
			return fastStr(&in.Owner, val, str, seen, 4)
		case "host":
			return fastStr(&in.Host, val, str, seen, 8)
		case "limit":
			return fastInt(&in.Limit, val, str, seen, 16)
		case "weight":
			return fastInt(&in.Weight, val, str, seen, 32)
		case "ttl_ms":
			return fastInt(&in.TTLMillis, val, str, seen, 64)
		case "wait_ms":
			return fastInt(&in.WaitMillis, val, str, seen, 128)
		case "pid":
			var n int64
			if !fastInt(&n, val, str, seen, 256) || n != int64(int(n)) {
				return false
			}
			in.PID = int(n)
			return true
		}
		return false
	})
}

func fastRenew(p []byte, dst *RenewRequest) bool {
	return fastInto(p, dst, func(in *RenewRequest, seen *uint, key, val []byte, str bool) bool {
		switch string(key) {
		case "name":
			return fastStr(&in.Name, val, str, seen, 1)
		case "id":
			return fastStr(&in.ID, val, str, seen, 2)
		case "ttl_ms":
			return fastInt(&in.TTLMillis, val, str, seen, 4)
		}
		return false
	})
}

func fastRelease(p []byte, dst *ReleaseRequest) bool {
	return fastInto(p, dst, func(in *ReleaseRequest, seen *uint, key, val []byte, str bool) bool {
		switch string(key) {
		case "name":
			return fastStr(&in.Name, val, str, seen, 1)
		case "id":
			return fastStr(&in.ID, val, str, seen, 2)
		}
		return false
	})
}
