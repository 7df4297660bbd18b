package etcd

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Key layout under the root prefix P (Config.Prefix):
//
//	P/q/<name>/<limit>/<slot>        one entry per holder or waiter, on its
//	                                 etcd lease; its create revision orders
//	                                 the queue and is the fencing token; its
//	                                 value names the sema lease (JSON)
//	P/t/<name>/<limit>               the queue's tail: the key of the entry
//	                                 last put, on its etcd lease; its mod
//	                                 revision is that entry's create
//	                                 revision. Every put of an entry puts
//	                                 it in the same Txn.
//	P/r/<name>/<limit>/<slot>        a lock's entry's state (see
//	                                 stateQueued), on the entry's etcd
//	                                 lease: what the waiter just behind it
//	                                 watches
//	P/f/<lease id>                   a lease an admin force-released, kept a
//	                                 while so that its holder learns why
//
// <name> is the semaphore name escaped by escapeName: a name never becomes
// a key unescaped, and never contains '/', so keys split unambiguously.
// <limit> is eight hex digits, so that the entries of one limit form a key
// range and an acquire can check in its Txn that no entry of another limit
// exists. An entry is named after a slot of the backend that put it (16 hex
// digits: the backend's random nonce, then a slot number it reuses once the
// slot's last entry is known deleted), not after the sema lease: a busy
// name keeps reusing a few keys. (Every key ever created stays in etcd's
// index until a compaction, and counting or reading a queue visits them
// all: one new key per acquisition would make each step slower than the
// last.)

// keys holds the key prefixes of one backend.
type keys struct {
	root   string // P/
	queues string // P/q/
	tails  string // P/t/
	states string // P/r/
	forced string // P/f/
}

func newKeys(prefix string) keys {
	root := prefix + "/"
	return keys{root: root, queues: root + "q/", tails: root + "t/", states: root + "r/", forced: root + "f/"}
}

// stateKey is the state key of the lock's entry key.
func (k keys) stateKey(key string) string { return k.states + strings.TrimPrefix(key, k.queues) }

// tailKey is the key of the tail of a queue.
func (k keys) tailKey(name string, limit int64) string {
	return k.tails + escapeName(name) + "/" + fmt.Sprintf("%08x", limit)
}

// nameDir is the prefix of every entry of name: P/q/<name>/.
func (k keys) nameDir(name string) string { return k.queues + escapeName(name) + "/" }

// limitDir is the prefix of the entries of name with the given limit.
func limitDir(nameDir string, limit int64) string {
	return nameDir + fmt.Sprintf("%08x", limit) + "/"
}

// slots hands out the names of a backend's entries.
type slots struct {
	mu    sync.Mutex
	nonce uint32
	next  uint32
	free  []uint32
}

// take returns a slot no live entry of this backend uses.
func (s *slots) take() uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.free); n > 0 {
		slot := s.free[n-1]
		s.free = s.free[:n-1]
		return slot
	}
	s.next++
	return s.next
}

// put gives back the slot of an entry known deleted (or never created).
func (s *slots) put(slot uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.free = append(s.free, slot)
}

// key is the key of the entry in a slot of a limit directory.
func (s *slots) key(limitDir string, slot uint32) string {
	return limitDir + fmt.Sprintf("%08x%08x", s.nonce, slot)
}

// slotOf returns the slot of key if it is one of this backend's.
func (s *slots) slotOf(key string) (uint32, bool) {
	if len(key) < 16 {
		return 0, false
	}
	v, err := strconv.ParseUint(key[len(key)-16:], 16, 64)
	if err != nil || uint32(v>>32) != s.nonce {
		return 0, false
	}
	return uint32(v), true
}

// forcedKey is the key that says an admin force-released lease id.
func (k keys) forcedKey(id string) string { return k.forced + id }

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

// parseEntryKey splits an entry key into name and limit. ok is false for a
// key that is not one of ours.
func (k keys) parseEntryKey(key string) (name string, limit int64, ok bool) {
	rest, found := strings.CutPrefix(key, k.queues)
	if !found {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 || len(rest)-i-1 != 16 || !isHex(rest[i+1:]) {
		return "", 0, false
	}
	rest = rest[:i]
	j := strings.LastIndexByte(rest, '/')
	if j < 0 || len(rest)-j-1 != 8 || !isHex(rest[j+1:]) {
		return "", 0, false
	}
	limit, err := strconv.ParseInt(rest[j+1:], 16, 64)
	if err != nil || limit < 1 {
		return "", 0, false
	}
	name, err = unescapeName(rest[:j])
	if err != nil {
		return "", 0, false
	}
	return name, limit, true
}

// isHex reports whether s is lower-case hex digits only.
func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
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
