package sema

import (
	"crypto/rand"
	mrand "math/rand/v2"
	"sync"
)

// idGens are ChaCha8 generators, each seeded from crypto/rand: a
// cryptographically strong stream (see [mrand.ChaCha8]) at a fraction of the
// cost of a crypto/rand call per ID. Pooled, so goroutines do not share one.
var idGens = sync.Pool{New: func() any {
	var seed [32]byte
	rand.Read(seed[:]) // never fails (crypto/rand, Go ≥ 1.24)
	return mrand.NewChaCha8(seed)
}}

// base32Alphabet is the standard base32 alphabet (RFC 4648).
const base32Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

// randID returns 128 random bits.
func randID() (hi, lo uint64) {
	g := idGens.Get().(*mrand.ChaCha8)
	hi, lo = g.Uint64(), g.Uint64()
	idGens.Put(g)
	return hi, lo
}

// idLen is the length of the lease IDs made here: 128 random bits as 26
// characters of [A-Z2-7], the standard base32 encoding of 16 bytes without
// padding.
const idLen = 26

// encodeIDTo encodes the 128 bits hi:lo as base32 into out, ten bits (two
// characters) at a time from the top; the last character holds the final
// three bits and two zero bits, as encoding/base32 does.
func encodeIDTo(out *[idLen]byte, hi, lo uint64) {
	for i := 0; i < len(out); i += 2 {
		pair := base32Pairs[hi>>54]
		out[i], out[i+1] = pair[0], pair[1]
		hi = hi<<10 | lo>>54
		lo <<= 10
	}
}

// base32Pairs maps ten bits to their two base32 characters.
var base32Pairs = func() (t [1 << 10][2]byte) {
	for v := range t {
		t[v] = [2]byte{base32Alphabet[v>>5], base32Alphabet[v&31]}
	}
	return t
}()
