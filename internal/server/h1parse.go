package server

import (
	"bytes"

	"github.com/sema-dev/sema/internal/wire"
)

// h1head is what the connection loop (h1conn.go) needs of a request head
// it serves itself: a POST of a hot route with a Content-Length body (or
// none).
type h1head struct {
	rt        *route
	auth      []byte // the Authorization value, trimmed; nil if absent
	length    int64  // Content-Length, 0 if absent
	close     bool   // Connection: close
	headBytes int    // length of the head, up to and including its empty line
}

// parseHead parses the head of one HTTP/1.1 request in p, which holds the
// whole head (headEnd found its end). It accepts only the plain shape our
// clients send: "POST <hot path> HTTP/1.1", CRLF line ends, one Host,
// at most one Authorization and one Content-Length (digits), no
// Transfer-Encoding, no Expect, header names that are tokens, values of
// visible characters, spaces and tabs. Anything else (ok == false) goes to
// net/http's own parser (the fallback), so this can only be faster, never
// different: FuzzParseHead checks it against http.ReadRequest.
func (s *Server) parseHead(p []byte) (h h1head, ok bool) {
	end := headEnd(p)
	if end < 0 {
		return h, false
	}
	h.headBytes = end
	p = p[:end]
	line, rest, ok := cutCRLF(p)
	if !ok {
		return h, false
	}
	method, line, ok := bytes.Cut(line, []byte{' '})
	if !ok || string(method) != "POST" {
		return h, false
	}
	target, proto, ok := bytes.Cut(line, []byte{' '})
	if !ok || string(proto) != "HTTP/1.1" {
		return h, false
	}
	switch string(target) {
	case wire.PathAcquire, wire.PathRelease, wire.PathRenew:
		h.rt = s.routes[string(target)]
	default:
		return h, false
	}
	hosts, auths, lengths := 0, 0, 0
	for {
		line, rest, ok = cutCRLF(rest)
		if !ok {
			return h, false
		}
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte{':'})
		if !ok || len(name) == 0 || !isToken(name) || !isFieldValue(value) {
			return h, false
		}
		value = trimOWS(value)
		switch {
		case asciiEqualFold(name, "host"):
			if !isPlainHost(value) {
				return h, false
			}
			hosts++
		case asciiEqualFold(name, "authorization"):
			auths++
			h.auth = value
		case asciiEqualFold(name, "content-length"):
			lengths++
			n, ok := wire.ParseLength(value)
			if !ok {
				return h, false
			}
			h.length = n
		case asciiEqualFold(name, "connection"):
			h.close = h.close || containsCloseToken(value)
		case asciiEqualFold(name, "transfer-encoding"), asciiEqualFold(name, "expect"):
			return h, false
		}
	}
	if hosts != 1 || auths > 1 || lengths > 1 || len(rest) != 0 {
		return h, false
	}
	return h, true
}

// headEnd returns the length of the head at the start of p, through the
// empty line that ends it, or -1 if p does not hold a whole head. A bare
// LF line end counts too (net/http's parser accepts it; parseHead does not).
func headEnd(p []byte) int {
	for i := 0; ; {
		j := bytes.IndexByte(p[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
		switch {
		case i < len(p) && p[i] == '\n':
			return i + 1
		case i+1 < len(p) && p[i] == '\r' && p[i+1] == '\n':
			return i + 2
		}
	}
}

// cutCRLF cuts one CRLF-terminated line off p.
func cutCRLF(p []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(p, '\n')
	if i < 1 || p[i-1] != '\r' {
		return nil, nil, false
	}
	return p[:i-1], p[i+1:], true
}

// isToken reports whether b is an RFC 9110 token (a valid header name).
func isToken(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 || !tokenChars[c] {
			return false
		}
	}
	return true
}

var tokenChars = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// isFieldValue accepts visible ASCII, spaces and tabs.
func isFieldValue(b []byte) bool {
	for _, c := range b {
		if (c < ' ' && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}

// isPlainHost accepts a non-empty host[:port] of letters, digits and
// ".:-[]", a subset of what net/http accepts.
func isPlainHost(b []byte) bool {
	for _, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '.' || c == ':' || c == '-' || c == '[' || c == ']') {
			return false
		}
	}
	return len(b) > 0
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// asciiEqualFold compares b with lower, which is lowercase ASCII.
func asciiEqualFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// containsCloseToken reports whether a Connection value lists "close".
func containsCloseToken(v []byte) bool {
	for len(v) > 0 {
		var part []byte
		part, v, _ = bytes.Cut(v, []byte{','})
		if asciiEqualFold(trimOWS(part), "close") {
			return true
		}
	}
	return false
}
