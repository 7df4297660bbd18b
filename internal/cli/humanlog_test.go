package cli

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"

	"github.com/sema-dev/sema"
)

// TestHumanLogger: the library's warnings become one line each, prefixed
// as the command's own messages, without a second "sema: ".
func TestHumanLogger(t *testing.T) {
	var b bytes.Buffer
	l := humanLogger(&b, "run", slog.LevelWarn)
	l.Info("not shown")
	l.With("name", "job").Warn("sema: renewal failed", "err", errors.Join(sema.ErrUnavailable, errors.New("dial\ntcp")))
	l.WithGroup("g").Error("bad", "k", 1)
	want := "sema run: warning: renewal failed (name=job, err=backend unavailable dial tcp)\n" +
		"sema run: error: bad (g.k=1)\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
