package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/sema-dev/sema"
)

// backendFlag registers --backend on fs.
func backendFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "backend", "", "backend `URL` (default $"+sema.EnvBackend+", else file:// in $XDG_STATE_HOME/sema/locks or ~/.local/state/sema/locks; see 'sema help backends')")
}

// openClient opens the backend as sema.OpenEnv does (rawURL, else
// $SEMA_BACKEND, else the default directory) and returns a client over it.
// It refuses a backend whose exclusion ends at this process (mem://): the
// commands that use it are separate processes. The library's and the
// backend's warnings at level and above become lines "sema CMD: warning: …"
// on w. Errors are reported on w as "sema CMD: …"; code is the exit code to
// use then.
func openClient(ctx context.Context, w io.Writer, cmd, rawURL string, level slog.Level) (c *sema.Client, code int) {
	log := humanLogger(w, cmd, level)
	b, err := sema.OpenEnv(ctx, rawURL, sema.WithBackendLogger(log))
	if err != nil {
		fmt.Fprintf(w, "sema %s: %s\n", cmd, errMessage(err))
		return nil, exitCodeFor(err)
	}
	if d, ok := b.(sema.Declarer); ok && d.Guarantees().Scope == sema.ScopeProcess {
		b.Close()
		fmt.Fprintf(w, "sema %s: %s keeps its locks in one process's memory, so sema %s cannot share them with any other process: use file:///dir (one host), or sema serve --backend mem:// and http://127.0.0.1:7543\n",
			cmd, sema.Redact(rawURLOr(rawURL)), cmd)
		return nil, ExitUsage
	}
	return sema.New(b, sema.WithLogger(log)), ExitOK
}

// rawURLOr names the backend for a message: the flag, else $SEMA_BACKEND's.
func rawURLOr(rawURL string) string {
	if rawURL != "" {
		return rawURL
	}
	return "the backend in $" + sema.EnvBackend
}
