package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/sema-dev/sema/internal/human"
)

// humanLogger returns a logger that writes records at level and above as
// lines for people, "sema CMD: warning: MESSAGE (key=value, …)", so that the
// library's and the backends' warnings read like the command's own
// messages instead of interleaving log records with them.
func humanLogger(w io.Writer, cmd string, level slog.Level) *slog.Logger {
	return slog.New(&humanHandler{w: w, prefix: "sema " + cmd + ": ", level: level, mu: new(sync.Mutex)})
}

type humanHandler struct {
	w      io.Writer
	prefix string
	level  slog.Level
	attrs  []slog.Attr
	group  string
	mu     *sync.Mutex // shared by the handlers derived from one
}

func (h *humanHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *humanHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(h.prefix)
	if r.Level >= slog.LevelError {
		b.WriteString("error: ")
	} else if r.Level >= slog.LevelWarn {
		b.WriteString("warning: ")
	}
	b.WriteString(strings.TrimPrefix(r.Message, "sema: "))
	var kv []string
	add := func(a slog.Attr) {
		if a.Equal(slog.Attr{}) {
			return
		}
		k := a.Key
		if h.group != "" {
			k = h.group + "." + k
		}
		kv = append(kv, k+"="+human.Message(a.Value.Resolve().String()))
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(func(a slog.Attr) bool { add(a); return true })
	if len(kv) > 0 {
		b.WriteString(" (" + strings.Join(kv, ", ") + ")")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := fmt.Fprintln(h.w, human.Line(b.String()))
	return err
}

func (h *humanHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h2 := *h
	h2.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &h2
}

func (h *humanHandler) WithGroup(name string) slog.Handler {
	h2 := *h
	if h2.group != "" {
		name = h2.group + "." + name
	}
	h2.group = name
	return &h2
}
