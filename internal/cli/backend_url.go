package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/dsn"
)

// Environment variables read by the CLI.
const (
	EnvBackend = "SEMA_BACKEND" // the default backend URL
	// EnvAuthToken holds the bearer token for http(s):// backends. It is not
	// SEMA_TOKEN: that is the fencing token sema run gives its job.
	EnvAuthToken = "SEMA_AUTH_TOKEN"
)

// backendFlag registers --backend on fs.
func backendFlag(fs *flag.FlagSet) *string {
	return fs.String("backend", "", "backend `URL` (default $"+EnvBackend+", else file:// in $XDG_STATE_HOME/sema/locks or ~/.local/state/sema/locks)")
}

// resolveBackend picks the backend URL: the flag, else $SEMA_BACKEND, else
// the per-user default directory for the file backend. makeDir says whether
// the default directory is created.
func resolveBackend(flagValue string, getenv func(string) string) (rawURL string, defaultDir string, err error) {
	if flagValue != "" {
		return flagValue, "", nil
	}
	if v := getenv(EnvBackend); v != "" {
		return v, "", nil
	}
	dir, err := defaultLockDir(getenv)
	if err != nil {
		return "", "", err
	}
	return (&url.URL{Scheme: "file", Path: dir}).String(), dir, nil
}

// defaultLockDir is $XDG_STATE_HOME/sema/locks, else ~/.local/state/sema/locks:
// persistent across reboots (unlike /tmp or /run), so fencing tokens never
// go back. A relative XDG_STATE_HOME is ignored, as the XDG spec says.
func defaultLockDir(getenv func(string) string) (string, error) {
	if x := getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "sema", "locks"), nil
	}
	home := getenv("HOME")
	if home == "" || !filepath.IsAbs(home) {
		return "", usageError("no backend: set --backend or $%s (and $HOME is not set for the default file backend)", EnvBackend)
	}
	return filepath.Join(home, ".local", "state", "sema", "locks"), nil
}

// openClient resolves and opens the backend and returns a client over it.
// Errors are reported to stderr; code is the exit code to use then.
func openClient(ctx context.Context, env *Env, flagValue string, opts ...sema.Option) (c *sema.Client, code int) {
	rawURL, dir, err := resolveBackend(flagValue, env.Getenv)
	if err != nil {
		fmt.Fprintf(env.Stderr, "sema: %s\n", errMessage(err))
		return nil, ExitUsage
	}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			fmt.Fprintf(env.Stderr, "sema: default lock directory: %v\n", err)
			return nil, ExitBackend
		}
	}
	b, err := openBackend(ctx, rawURL, env.Getenv)
	if err != nil {
		fmt.Fprintf(env.Stderr, "sema: backend %s: %s\n", dsn.Redact(rawURL), errMessage(err))
		return nil, exitCodeFor(err)
	}
	opts = append([]sema.Option{sema.WithLogger(stderrLogger(env.Stderr))}, opts...)
	return sema.New(b, opts...), ExitOK
}

// openBackend opens rawURL with the credentials found in the environment.
func openBackend(ctx context.Context, rawURL string, getenv func(string) string) (sema.Backend, error) {
	var opts []dsn.Option
	if tok := getenv(EnvAuthToken); tok != "" {
		opts = append(opts, dsn.WithToken(tok))
	}
	return dsn.Open(ctx, rawURL, opts...)
}

// stderrLogger logs warnings and errors as text lines on w.
func stderrLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
