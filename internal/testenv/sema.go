package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var semaBin struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

// SemaBinary builds cmd/sema once per test binary — with the race
// detector when the tests run with it, so that the server and the
// supervisor in separate processes are race-checked too — and returns its
// path. Packages that call it run their tests through Main, which removes
// the binary at the end.
func SemaBinary(tb testing.TB) string {
	tb.Helper()
	semaBin.once.Do(func() {
		semaBin.dir, semaBin.err = os.MkdirTemp("", "sema-bin-")
		if semaBin.err != nil {
			return
		}
		semaBin.path = filepath.Join(semaBin.dir, "sema")
		gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(gobin); err != nil {
			gobin = "go"
		}
		args := []string{"build", "-o", semaBin.path}
		if Race {
			args = append(args, "-race")
		}
		args = append(args, "github.com/sema-dev/sema/cmd/sema")
		semaBin.out, semaBin.err = exec.Command(gobin, args...).CombinedOutput()
	})
	if semaBin.err != nil {
		tb.Fatalf("testenv: building sema: %v\n%s", semaBin.err, semaBin.out)
	}
	return semaBin.path
}
