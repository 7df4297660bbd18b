package server

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/store"
)

// Role is what a token may do.
type Role int

// Roles.
const (
	RoleClient Role = iota + 1 // acquire, renew, release, describe, guarantees
	RoleAdmin                  // everything, and any lease
)

func (r Role) String() string {
	switch r {
	case RoleClient:
		return "client"
	case RoleAdmin:
		return "admin"
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// MinTokenLen is the shortest accepted token.
const MinTokenLen = 16

// Token is one accepted credential.
type Token struct {
	Role   Role
	Secret string
}

func (t Token) validate() error {
	if t.Role != RoleClient && t.Role != RoleAdmin {
		return fmt.Errorf("server: %w: unknown role %d", sema.ErrInvalidArgument, int(t.Role))
	}
	if len(t.Secret) < MinTokenLen || len(t.Secret) > 4096 {
		return fmt.Errorf("server: %w: a token must be %d-4096 bytes", sema.ErrInvalidArgument, MinTokenLen)
	}
	for i := 0; i < len(t.Secret); i++ {
		if c := t.Secret[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("server: %w: a token must be printable ASCII without spaces", sema.ErrInvalidArgument)
		}
	}
	return nil
}

// LoadTokens reads the token file at path (ParseTokens). A file that
// group or others may read or write is refused: its tokens would be
// anybody's on the host.
func LoadTokens(path string) ([]Token, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("server: %w: token file: %w", sema.ErrInvalidArgument, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("server: %w: token file: %w", sema.ErrInvalidArgument, err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, fmt.Errorf("server: %w: token file %s has mode %v: other users may read it; "+
			"make it private (chmod 600)", sema.ErrPermission, path, perm)
	}
	return ParseTokens(f)
}

// maxTokenFile bounds a token file.
const maxTokenFile = 1 << 20

// ParseTokens reads a token file: one "role token" pair per line, role
// "client" or "admin"; blank lines and lines starting with # are ignored.
// A file over 1 MiB is refused whole (its last line might hold a cut
// token). Errors name the line, never the token.
func ParseTokens(r io.Reader) ([]Token, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxTokenFile+1))
	if err != nil {
		return nil, fmt.Errorf("server: %w: token file: %w", sema.ErrInvalidArgument, err)
	}
	if len(data) > maxTokenFile {
		return nil, fmt.Errorf("server: %w: token file larger than %d bytes", sema.ErrInvalidArgument, maxTokenFile)
	}
	var out []Token
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("server: %w: token file line %d: want \"role token\"", sema.ErrInvalidArgument, n)
		}
		t := Token{Secret: f[1]}
		switch f[0] {
		case "client":
			t.Role = RoleClient
		case "admin":
			t.Role = RoleAdmin
		default:
			return nil, fmt.Errorf("server: %w: token file line %d: role must be client or admin", sema.ErrInvalidArgument, n)
		}
		if err := t.validate(); err != nil {
			return nil, fmt.Errorf("token file line %d: %w", n, err)
		}
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("server: %w: token file: %w", sema.ErrInvalidArgument, err)
	}
	return out, nil
}

// NeedsAuth reports whether serving on addr ("host:port") requires tokens:
// anything but a loopback address does.
func NeedsAuth(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return true
	}
	if host == "localhost" {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// caller is an authenticated request's identity.
type caller struct {
	store.Caller
	role Role
	key  string // whose waiters and connections it counts toward (limits.go)
}

// limitKey is whom a request's waiters and connections count toward: its
// token's principal, or without tokens the client's IP address.
func limitKey(who caller, r *http.Request) string {
	if who.Principal != "" {
		return who.Principal
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "addr " + host
}

type credentials map[[sha256.Size]byte]caller

func newCredentials(tokens []Token) credentials {
	if len(tokens) == 0 {
		return nil
	}
	c := make(credentials, len(tokens))
	for _, t := range tokens {
		sum := sha256.Sum256([]byte(t.Secret))
		// The principal is a fingerprint of the token, journaled with the
		// leases it acquires: never the token itself.
		c[sum] = caller{Caller: store.Caller{Principal: hex.EncodeToString(sum[:8]), Admin: t.Role == RoleAdmin}, role: t.Role}
	}
	return c
}

var anonymousAdmin = caller{Caller: store.Caller{Admin: true}, role: RoleAdmin}

// authenticate returns the caller of r. Tokens are looked up by their
// SHA-256, so the lookup's timing says nothing about a token's bytes.
func (c credentials) authenticate(r *http.Request) (caller, bool) {
	if c == nil {
		return anonymousAdmin, true
	}
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return caller{}, false
	}
	who, ok := c[sha256.Sum256([]byte(h[len(prefix):]))]
	return who, ok
}
