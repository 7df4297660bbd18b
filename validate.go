package sema

import (
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"
)

// Bounds on every input. Backends may rely on them after
// [Request.Validate].
const (
	MaxNameLen  = 255     // bytes
	MaxOwnerLen = 255     // bytes
	MaxLimit    = 1 << 30 // permits per name
	MinTTL      = 100 * time.Millisecond
	MaxTTL      = 24 * time.Hour
	MaxIDLen    = 64        // bytes of a lease ID
	MaxPID      = 1<<31 - 1 // the largest process ID a request may carry
)

// ValidateName reports whether name is usable: 1–255 bytes of UTF-8 without
// control characters and without Unicode format characters (bidi overrides,
// zero-width characters), which would let one name pose as another in
// listings and logs. The error wraps [ErrInvalidName].
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidName, len(name), MaxNameLen)
	}
	if err := checkText(name); err != nil {
		return fmt.Errorf("%w: %q %s", ErrInvalidName, name, err)
	}
	if r, ok := formatChar(name); ok {
		return fmt.Errorf("%w: %q contains the invisible format character %U", ErrInvalidName, name, r)
	}
	return nil
}

// formatChar returns the first Unicode format character (category Cf) of
// s, if any. ASCII has none.
func formatChar(s string) (rune, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			for _, r := range s[i:] {
				if unicode.Is(unicode.Cf, r) {
					return r, true
				}
			}
			return 0, false
		}
	}
	return 0, false
}

// ValidateOwner checks an owner label (or a force-release's
// [ForceOptions].By): ≤ 255 bytes of UTF-8 without control characters (it
// may be empty).
func ValidateOwner(owner string) error {
	if len(owner) > MaxOwnerLen {
		return fmt.Errorf("%w: owner is %d bytes, at most %d", ErrInvalidArgument, len(owner), MaxOwnerLen)
	}
	if err := checkText(owner); err != nil {
		return fmt.Errorf("%w: owner %q %s", ErrInvalidArgument, owner, err)
	}
	return nil
}

type textError string

func (e textError) Error() string { return string(e) }

func checkText(s string) error {
	i := 0
	for ; i+8 <= len(s) && printableASCII8(load64(s, i)); i += 8 {
	}
	if i == len(s) || i >= 8 && i+8 > len(s) && printableASCII8(load64(s, len(s)-8)) {
		return nil // the last word overlaps the one before
	}
	ascii := true
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return textError(fmt.Sprintf("contains control character %U", rune(c)))
		} else if c >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return nil
	}
	if !utf8.ValidString(s) {
		return textError("is not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return textError(fmt.Sprintf("contains control character %U", r))
		}
	}
	return nil
}

// Word-at-a-time checks of eight bytes: ones has 0x01 in each byte, highs
// 0x80. For bytes below 0x80, adding 0x80−a to each sets its high bit iff
// the byte is ≥ a, with no carry into the next byte.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// load64 reads the eight bytes of s at i as a little-endian word.
func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// printableASCII8 reports whether each byte of w is in [0x20, 0x7e].
func printableASCII8(w uint64) bool {
	return w&highs == 0 && (w+0x60*ones)&highs == highs && (w+0x01*ones)&highs == 0
}

// inRange8 sets the high bit of each byte of w (all below 0x80) that is in
// [a, b].
func inRange8(w uint64, a, b byte) uint64 {
	return (w + uint64(0x80-a)*ones) &^ (w + uint64(0x7f-b)*ones) & highs
}

// alnum8 reports whether each byte of w is in [0-9A-Za-z]. Setting bit 0x20
// folds exactly the letters onto a–z (0x40 '@' folds to 0x60 '`', outside),
// so two range tests do.
func alnum8(w uint64) bool {
	return w&highs == 0 && inRange8(w|0x20*ones, 'a', 'z')|inRange8(w, '0', '9') == highs
}

// ValidateLimit checks 1 ≤ limit ≤ MaxLimit.
func ValidateLimit(limit int64) error {
	if limit < 1 || limit > MaxLimit {
		return fmt.Errorf("%w: limit %d out of range [1, %d]", ErrInvalidArgument, limit, int64(MaxLimit))
	}
	return nil
}

// ValidateTTL checks MinTTL ≤ ttl ≤ MaxTTL.
func ValidateTTL(ttl time.Duration) error {
	if ttl < MinTTL || ttl > MaxTTL {
		return fmt.Errorf("%w: ttl %v out of range [%v, %v]", ErrInvalidArgument, ttl, MinTTL, MaxTTL)
	}
	return nil
}

// ValidateID checks a lease ID: 1–64 bytes of [A-Za-z0-9_-].
func ValidateID(id string) error {
	if id == "" || len(id) > MaxIDLen {
		return fmt.Errorf("%w: lease id must be 1-%d bytes", ErrInvalidArgument, MaxIDLen)
	}
	i := 0
	for ; i+8 <= len(id) && alnum8(load64(id, i)); i += 8 {
	}
	if i == len(id) || i >= 8 && i+8 > len(id) && alnum8(load64(id, len(id)-8)) {
		return nil
	}
	for ; i < len(id); i++ {
		if !idByte[id[i]] {
			return fmt.Errorf("%w: lease id has byte %q; only [A-Za-z0-9_-] allowed", ErrInvalidArgument, id[i])
		}
	}
	return nil
}

// idByte marks the bytes allowed in a lease ID.
var idByte = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
	}
	return t
}()

// Validate checks every field of a request. Backends call it first.
func (r *Request) Validate() error {
	if err := ValidateName(r.Name); err != nil {
		return err
	}
	if err := r.ValidateTerms(); err != nil {
		return err
	}
	if err := ValidateOwner(r.Owner); err != nil {
		return err
	}
	if err := checkText(r.Host); err != nil || len(r.Host) > MaxOwnerLen {
		return fmt.Errorf("%w: bad host label", ErrInvalidArgument)
	}
	return nil
}

// ValidateTerms checks what [Request.Validate] does except the bytes of
// the name and of the owner and host labels: the lease ID, limit, weight,
// TTL and PID, and that the owner label is not the lease ID. It is for a
// backend that has already found those strings valid (the same name and
// labels again and again), so that only what changes per call is checked.
func (r *Request) ValidateTerms() error {
	if err := ValidateID(r.ID); err != nil {
		return err
	}
	if err := ValidateLimit(r.Limit); err != nil {
		return err
	}
	if r.Weight < 1 || r.Weight > r.Limit {
		return fmt.Errorf("%w: weight %d out of range [1, limit %d]", ErrInvalidArgument, r.Weight, r.Limit)
	}
	if err := ValidateTTL(r.TTL); err != nil {
		return err
	}
	if r.Owner == r.ID {
		return fmt.Errorf("%w: owner label equals the lease id", ErrInvalidArgument)
	}
	if r.PID < 0 || r.PID > MaxPID {
		return fmt.Errorf("%w: pid %d out of range [0, %d]", ErrInvalidArgument, r.PID, MaxPID)
	}
	return nil
}
