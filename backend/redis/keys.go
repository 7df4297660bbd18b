package redis

import (
	"fmt"
	"strings"

	"github.com/sema-dev/sema"
)

// A name's keys are Prefix + "{" + escape(name) + "}" + a suffix:
//
//	:s  hash: the limit, used weight and counters (fields starting with "."),
//	    and one record per holder and per waiter, under its lease ID
//	:q  sorted set: the waiters' lease IDs in arrival order
//	:t  string: the fencing token counter (no TTL: it outlives every lease)
//
// All three share the hash tag between the braces, so they live in one
// Redis Cluster slot and one script can change them atomically. The escaped
// name contains no braces, glob characters, '%' (except as the escape),
// spaces or control bytes, so a name can neither break the tag nor match
// other keys in a SCAN.

// safeByte marks the bytes that escape keeps as they are; every other byte
// becomes %XX.
var safeByte = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("-._~/:@+,=", byte(c)) >= 0
	}
	return t
}()

// escape percent-encodes the bytes of s outside the safe set. It maps each
// byte on its own, so escape(p) is a prefix of escape(s) exactly when p is
// a prefix of s.
func escape(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !safeByte[s[i]] {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if safeByte[c] {
			b = append(b, c)
		} else {
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
	}
	return string(b)
}

// unescape reverses escape; it fails on anything escape cannot produce.
func unescape(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+2 >= len(s) {
				return "", fmt.Errorf("truncated escape in %q", s)
			}
			v, ok := unhex(s[i+1], s[i+2])
			if !ok || safeByte[v] {
				return "", fmt.Errorf("bad escape in %q", s)
			}
			b.WriteByte(v)
			i += 2
		case safeByte[c]:
			b.WriteByte(c)
		default:
			return "", fmt.Errorf("unescaped byte %q in %q", c, s)
		}
	}
	return b.String(), nil
}

func unhex(a, b byte) (byte, bool) {
	x, ok1 := hexVal(a)
	y, ok2 := hexVal(b)
	return x<<4 | y, ok1 && ok2
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// keyspace names the keys of one backend's prefix.
type keyspace struct{ prefix string }

// keys returns the state, queue and token keys of name, in the order the
// scripts take them.
func (k keyspace) keys(name string) []string {
	tag := k.prefix + "{" + escape(name) + "}:"
	return []string{tag + "s", tag + "q", tag + "t"}
}

// pattern is the SCAN MATCH pattern of the state keys of names starting
// with prefix.
func (k keyspace) pattern(prefix string) string {
	return k.prefix + "{" + escape(prefix) + "*}:s"
}

// nameOf returns the name whose state key is key.
func (k keyspace) nameOf(key string) (string, error) {
	rest, ok := strings.CutPrefix(key, k.prefix+"{")
	if !ok {
		return "", fmt.Errorf("key %q is not under prefix %q", key, k.prefix)
	}
	esc, ok := strings.CutSuffix(rest, "}:s")
	if !ok {
		return "", fmt.Errorf("key %q is not a state key", key)
	}
	name, err := unescape(esc)
	if err != nil {
		return "", err
	}
	if err := sema.ValidateName(name); err != nil {
		return "", err
	}
	return name, nil
}

// validPrefix checks a key prefix: 1–64 bytes that escape keeps as they
// are (so no braces, no glob characters, no spaces).
func validPrefix(p string) error {
	if p == "" || len(p) > 64 {
		return fmt.Errorf("%w: redis: key prefix must be 1-64 bytes", sema.ErrInvalidArgument)
	}
	if escape(p) != p {
		return fmt.Errorf("%w: redis: key prefix %q may only hold letters, digits and -._~/:@+,=", sema.ErrInvalidArgument, p)
	}
	return nil
}
