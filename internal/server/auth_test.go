package server

import (
	"errors"
	"os"
	"path/filepath"
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
