package sema

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
)

// Environment variables read by [OpenEnv] and the sema command.
const (
	// EnvBackend holds the backend URL.
	EnvBackend = "SEMA_BACKEND"
	// EnvAuthToken holds the bearer token for a sema server (http, https).
	// It is not SEMA_TOKEN: that is the fencing token `sema run` gives its
	// job.
	EnvAuthToken = "SEMA_AUTH_TOKEN"
)

// OpenEnv opens a backend the way the sema command does, for programs that
// share its locks: rawURL if it is not empty (a flag, say), else the URL in
// $SEMA_BACKEND, else file:// in the user's state directory
// ($XDG_STATE_HOME/sema/locks, default ~/.local/state/sema/locks, created
// 0700 if missing); with the bearer token in $SEMA_AUTH_TOKEN for a sema
// server unless [WithAuthToken] is given. It reads these variables when it is
// called; nothing else in this module reads the environment. The backend's
// package must be imported, as for [Open].
func OpenEnv(ctx context.Context, rawURL string, opts ...OpenOption) (Backend, error) {
	u, dir, err := envURL(rawURL, os.Getenv)
	if err != nil {
		return nil, err
	}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("%w: the default lock directory: %w", ErrUnavailable, err)
		}
	}
	if tok := os.Getenv(EnvAuthToken); tok != "" {
		opts = append([]OpenOption{WithAuthToken(tok)}, opts...)
	}
	return Open(ctx, u, opts...)
}

// envURL picks the backend URL as OpenEnv does. dir is the default
// directory to create, if that is what it picked.
func envURL(rawURL string, getenv func(string) string) (u, dir string, err error) {
	if rawURL != "" {
		return rawURL, "", nil
	}
	if v := getenv(EnvBackend); v != "" {
		return v, "", nil
	}
	dir, err = defaultLockDir(getenv)
	if err != nil {
		return "", "", err
	}
	return (&url.URL{Scheme: "file", Path: dir}).String(), dir, nil
}

// defaultLockDir is $XDG_STATE_HOME/sema/locks, else ~/.local/state/sema/locks:
// it lasts across reboots (unlike /tmp or /run), so fencing tokens never
// go back. A relative XDG_STATE_HOME is ignored, as the XDG spec says.
func defaultLockDir(getenv func(string) string) (string, error) {
	if x := getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "sema", "locks"), nil
	}
	home := getenv("HOME")
	if home == "" || !filepath.IsAbs(home) {
		return "", fmt.Errorf("%w: no backend: give a URL or set $%s ($HOME is not set, for the default file:// directory)",
			ErrInvalidArgument, EnvBackend)
	}
	return filepath.Join(home, ".local", "state", "sema", "locks"), nil
}
