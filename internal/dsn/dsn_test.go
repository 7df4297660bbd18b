package dsn

import (
	"context"
	"errors"
	"net/url"
	"path"
	"runtime"
	"strings"
	"testing"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/file"
	"github.com/sema-dev/sema/backend/mem"
	"github.com/sema-dev/sema/backend/remote"
)

// TestOpen: each scheme Open knows gives its backend.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		url  string
		want func(sema.Backend) bool
	}{
		{"mem://", isType[*mem.Backend]},
		{"memory://", isType[*mem.Backend]},
		{"MEM://", isType[*mem.Backend]},
		{"http://127.0.0.1:7878", isType[*remote.Backend]},
		{"http://localhost:7878/sema", isType[*remote.Backend]},
		{"https://sema.example:443", isType[*remote.Backend]},
		{"HTTP://127.0.0.1:7878", isType[*remote.Backend]},
	}
	if runtime.GOOS == "linux" {
		cases = append(cases,
			struct {
				url  string
				want func(sema.Backend) bool
			}{"file://" + dir + "/locks", func(b sema.Backend) bool {
				fb, ok := b.(*file.Backend)
				return ok && fb.Dir() == dir+"/locks"
			}},
		)
	}
	for _, tc := range cases {
		b, err := Open(context.Background(), tc.url, WithToken("secret-token"))
		if err != nil {
			t.Errorf("Open(%q): %v", tc.url, err)
			continue
		}
		if !tc.want(b) {
			t.Errorf("Open(%q) = %T, not the expected backend", tc.url, b)
		}
		if err := b.Close(); err != nil {
			t.Errorf("Close of %q: %v", tc.url, err)
		}
	}
}

func isType[T sema.Backend](b sema.Backend) bool {
	_, ok := b.(T)
	return ok
}

// TestOpenErrors: bad URLs are ErrInvalidArgument with a message that says
// what is wrong, and never show a password.
func TestOpenErrors(t *testing.T) {
	cases := []struct {
		url  string
		says string // in the message
	}{
		{"", `unknown scheme ""`},
		{"localhost:7878", "unknown scheme"},
		{"/var/lib/sema", `unknown scheme ""`},
		{"gopher://host", `unknown scheme "gopher" (known: ` + strings.Join(Schemes, ", ") + ")"},
		{"ftp://user:hunter2@host/x", "unknown scheme"},
		{"http://[::1", "not a valid URL"},
		{"http://user:hunter2@[::1", "not a valid URL"},
		{"http://a b", "not a valid URL"},
		{"http://host/\x7f", "not a valid URL"},
		{"%zz://x", "not a valid URL"},
		{"http://user:hunter2@host:7878", "SEMA_AUTH_TOKEN"},
		{"https://user@host", "SEMA_AUTH_TOKEN"},
		{"file://host/var/lib/sema", "three slashes"},
		{"file://user:hunter2@/var/lib/sema", "takes no host"},
		{"file:relative/dir", "absolute path"},
		{"file://", "absolute path"},
		{"file:///var/lib/sema?sync=1", "no query or fragment"},
		{"file:///var/lib/sema#x", "no query or fragment"},
	}
	for _, tc := range cases {
		b, err := Open(context.Background(), tc.url)
		if err == nil {
			_ = b.Close()
			t.Errorf("Open(%q) succeeded", tc.url)
			continue
		}
		if !errors.Is(err, sema.ErrInvalidArgument) {
			t.Errorf("Open(%q): %v, want ErrInvalidArgument", tc.url, err)
		}
		if !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Open(%q): %q does not say %q", tc.url, err, tc.says)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q): the error shows the password: %q", tc.url, err)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"http://user:hunter2@host:7878/x": "http://user:xxxxx@host:7878/x",
		"http://user@host":                "http://user@host",
		"http://host:7878":                "http://host:7878",
		"mem://":                          "mem://",
		"http://user:hunter2@[::1":        "(unparseable url)",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// dials reports whether Open of raw would connect to a server at once
// (anywhere the fuzzer's URL points).
func dials(raw string) bool {
	scheme, _, _ := strings.Cut(raw, ":")
	switch strings.ToLower(scheme) {
	case "redis", "rediss", "etcd", "etcds", "postgres", "postgresql":
		return true
	}
	return false
}

// FuzzOpen: no URL makes Open panic; every error wraps a sema sentinel and
// hides the URL's password. Directories a file:// URL names are moved into
// a temporary directory first: the fuzzer must not create them anywhere.
func FuzzOpen(f *testing.F) {
	for _, s := range []string{
		"mem://", "file:///tmp/sema", "file://h/x", "file:x", "http://127.0.0.1:1", "https://u:p@h",
		"http://[::1", "redis://localhost:6379/0", "postgres://u:pw@h/db?sslmode=disable",
		"etcd://h1:2379,h2:2379", "FILE:///a/../../b", "http://h/%zz", "",
	} {
		f.Add(s)
	}
	root := f.TempDir()
	f.Fuzz(func(t *testing.T, raw string) {
		if dials(raw) {
			return // Redis, PostgreSQL and etcd URLs connect at Open: their packages fuzz their parsers
		}
		if u, err := url.Parse(raw); err == nil && strings.EqualFold(u.Scheme, "file") {
			u.Path = root + path.Clean("/"+u.Path)
			u.RawPath = ""
			raw = u.String()
		}
		b, err := Open(context.Background(), raw)
		if err == nil {
			if fb, ok := b.(*file.Backend); ok && !strings.HasPrefix(fb.Dir(), root+"/") && fb.Dir() != root {
				t.Errorf("Open(%q) opened %s, outside %s", raw, fb.Dir(), root)
			}
			if err := b.Close(); err != nil {
				t.Errorf("Close of Open(%q): %v", raw, err)
			}
			return
		}
		if !errors.Is(err, sema.ErrInvalidArgument) && !errors.Is(err, sema.ErrUnavailable) {
			t.Errorf("Open(%q): %v wraps no sema sentinel", raw, err)
		}
		if u, perr := url.Parse(raw); perr == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok && len(pw) >= 4 && strings.Count(raw, pw) == 1 && strings.Contains(err.Error(), pw) {
				t.Errorf("Open(%q): the error shows the password: %q", raw, err)
			}
		}
	})
}
