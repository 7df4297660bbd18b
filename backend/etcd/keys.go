package etcd

import (
	"fmt"
	"strconv"
	"strings"
)

// Key layout under the root prefix P (Config.Prefix):
//
//	P/q/<name>/<limit>/<lease id>   one entry per holder or waiter, attached
//	                                to its etcd lease; its create revision
//	                                orders the queue and is the fencing token
//	P/r/<lease id>                  a force-released lease, kept a while so
//	                                that its holder learns why it was lost
//
// <name> is the semaphore name escaped by escapeName: a name never becomes
// a key unescaped, and never contains '/', so keys split unambiguously.
// <limit> is eight hex digits, so that the entries of one limit form a key
// range and an acquire can check in its Txn that no entry of another limit
// exists.

// keys holds the key prefixes of one backend.
type keys struct {
	root   string // P/
	queues string // P/q/
	marks  string // P/r/
}

func newKeys(prefix string) keys {
	root := prefix + "/"
	return keys{root: root, queues: root + "q/", marks: root + "r/"}
}

// nameDir is the prefix of every entry of name: P/q/<name>/.
func (k keys) nameDir(name string) string { return k.queues + escapeName(name) + "/" }

// limitDir is the prefix of the entries of name with the given limit.
func limitDir(nameDir string, limit int64) string {
	return nameDir + fmt.Sprintf("%08x", limit) + "/"
}

// entryKey is the key of lease id in a limit directory.
func entryKey(limitDir, id string) string { return limitDir + id }

// markKey is the key that records a force-release of lease id.
func (k keys) markKey(id string) string { return k.marks + id }

// prefixEnd returns the end of the key range of all keys starting with p.
// Keys here are never empty and never end in 0xff (escaped names and hex).
func prefixEnd(p string) string {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return "\x00" // the whole key space: never reached with our keys
}

// parseEntryKey splits an entry key into name, limit and lease id. ok is
// false for a key that is not one of ours.
func (k keys) parseEntryKey(key string) (name string, limit int64, id string, ok bool) {
	rest, found := strings.CutPrefix(key, k.queues)
	if !found {
		return "", 0, "", false
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return "", 0, "", false
	}
	id = rest[i+1:]
	rest = rest[:i]
	j := strings.LastIndexByte(rest, '/')
	if j < 0 || len(rest)-j-1 != 8 || id == "" {
		return "", 0, "", false
	}
	limit, err := strconv.ParseInt(rest[j+1:], 16, 64)
	if err != nil || limit < 1 {
		return "", 0, "", false
	}
	name, err = unescapeName(rest[:j])
	if err != nil {
		return "", 0, "", false
	}
	return name, limit, id, true
}

// escapeName maps a name to a key segment byte by byte: '%', '/' and the
// control bytes become %XX, every other byte stays. It is injective and
// keeps prefixes (escapeName(a+b) = escapeName(a)+escapeName(b)), so a
// prefix of names is a prefix of keys.
func escapeName(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if mustEscape(s[i]) {
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
		if mustEscape(c) {
			b = append(b, '%', hex[c>>4], hex[c&15])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}

func mustEscape(c byte) bool { return c == '%' || c == '/' || c < 0x20 || c == 0x7f }

// unescapeName inverts escapeName; it refuses anything escapeName could
// not have produced.
func unescapeName(s string) (string, error) {
	if !strings.ContainsRune(s, '%') {
		for i := 0; i < len(s); i++ {
			if mustEscape(s[i]) {
				return "", fmt.Errorf("unescaped byte %#x", s[i])
			}
		}
		return s, nil
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			if mustEscape(c) {
				return "", fmt.Errorf("unescaped byte %#x", c)
			}
			b = append(b, c)
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("truncated escape")
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil || !mustEscape(byte(v)) || s[i+1] >= 'a' || s[i+2] >= 'a' {
			return "", fmt.Errorf("bad escape %q", s[i:i+3])
		}
		b = append(b, byte(v))
		i += 2
	}
	return string(b), nil
}
