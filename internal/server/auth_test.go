package server

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sema-dev/sema"
)

// TestLoadTokensRefusesSharedFile: a token file other users may read is
// refused, as its tokens would be theirs; a private one loads.
func TestLoadTokensRefusesSharedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("client "+aliceTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if toks, err := LoadTokens(path); err != nil || len(toks) != 1 {
		t.Fatalf("private file: %v %v", toks, err)
	}
	for _, mode := range []os.FileMode{0o640, 0o604, 0o660} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadTokens(path); !errors.Is(err, sema.ErrPermission) {
			t.Errorf("mode %v: %v, want a refusal", mode, err)
		}
	}
}

// TestNeedsAuth: only an address on loopback may serve without tokens;
// anything else, or anything that does not parse, needs them.
func TestNeedsAuth(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7411":          false,
		"127.8.9.10:7411":         false, // all of 127/8 is loopback
		"[::1]:7411":              false,
		"[::ffff:127.0.0.1]:7411": false, // IPv4-mapped loopback
		"localhost:7411":          false,
		"0.0.0.0:7411":            true,
		":7411":                   true, // every interface
		"[::]:7411":               true,
		"10.1.2.3:7411":           true,
		"[::ffff:10.1.2.3]:7411":  true,
		"[fe80::1%lo]:7411":       true,
		"sema.example:7411":       true,
		"localhost.example:7411":  true,
		"127.0.0.1":               true, // no port: does not parse
		"[::1":                    true,
		"":                        true,
		"127.0.0.1:7411:1":        true,
	} {
		if got := NeedsAuth(addr); got != want {
			t.Errorf("NeedsAuth(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestParseTokensErrors: each kind of defect in a token file is an error
// wrapping ErrInvalidArgument that names the line and never the token.
func TestParseTokensErrors(t *testing.T) {
	const secret = "s3cret-token-0123456789"
	for _, c := range []struct {
		name, file, says string
	}{
		{"one field", "# tokens\n\nclient " + secret + "\n" + secret + "\n", "line 4: want \"role token\""},
		{"three fields", "client " + secret + " extra\n", "line 1: want \"role token\""},
		{"unknown role", "root " + secret + "\n", "line 1: role must be client or admin"},
		{"role in capitals", "Admin " + secret + "\n", "line 1: role must be client or admin"},
		{"token too short", "client " + secret[:MinTokenLen-1] + "\n", "line 1: " + "server: sema: invalid argument: a token must be 16-4096 bytes"},
		{"token too long", "admin " + strings.Repeat(secret, 200) + "\n", "line 1: server: sema: invalid argument: a token must be 16-4096 bytes"},
		{"control character", "client " + secret + "\x01x\n", "line 1: server: sema: invalid argument: a token must be printable ASCII"},
		{"not ASCII", "client " + secret + "é\n", "line 1: server: sema: invalid argument: a token must be printable ASCII"},
		{"line too long to read", "client " + secret + "\n" + strings.Repeat("#", 70_000) + "\n", "token file: bufio.Scanner: token too long"},
		{"file too large", "client " + secret + "\n" + strings.Repeat("# padding\n", 110_000), "token file larger than 1048576 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			toks, err := ParseTokens(strings.NewReader(c.file))
			if err == nil {
				t.Fatalf("parsed into %d tokens", len(toks))
			}
			if !errors.Is(err, sema.ErrInvalidArgument) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("%v\nwant an error wrapping ErrInvalidArgument that says %q", err, c.says)
			}
			if strings.Contains(err.Error(), secret[:MinTokenLen-1]) {
				t.Fatalf("the error shows the token: %v", err)
			}
		})
	}
	// What is not a defect: comments, blank lines, tabs, CRLF.
	toks, err := ParseTokens(strings.NewReader("# sema tokens\r\n\r\n  # indented comment\nclient\t" + secret + "\r\nadmin  " + adminTok + "  \n"))
	if err != nil || len(toks) != 2 || toks[0] != (Token{RoleClient, secret}) || toks[1] != (Token{RoleAdmin, adminTok}) {
		t.Fatalf("a well-formed file: %+v, %v", toks, err)
	}
}

// TestLoadTokensErrors: a token file that cannot be read is an error
// wrapping ErrInvalidArgument and what went wrong.
func TestLoadTokensErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadTokens(filepath.Join(dir, "missing")); !errors.Is(err, sema.ErrInvalidArgument) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTokens(sub); !errors.Is(err, sema.ErrInvalidArgument) {
		t.Errorf("a directory: %v", err)
	}
}
