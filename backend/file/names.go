package file

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
)

// fileExt is the extension of state files: <hex SHA-256 of the name>.sema.
const fileExt = ".sema"

// fileName maps a semaphore name to the base name of its state file. A name
// never becomes a path: any bytes map to 64 hex digits.
func fileName(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:]) + fileExt
}

// statePath is the path of name's state file in dir: dir/fileName(name).
func statePath(dir, name string) string {
	sum := sha256.Sum256([]byte(name))
	b := make([]byte, 0, len(dir)+1+2*len(sum)+len(fileExt))
	b = append(b, dir...)
	b = append(b, filepath.Separator)
	b = hex.AppendEncode(b, sum[:])
	return string(append(b, fileExt...))
}

// isStateFile reports whether a directory entry looks like a state file.
func isStateFile(base string) bool {
	h, ok := strings.CutSuffix(base, fileExt)
	if !ok || len(h) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
}
