package file

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/sema-dev/sema"
)

func init() { sema.Register("file", openURL) }

// openURL opens "file:///abs/dir" for sema.Open.
func openURL(_ context.Context, rawURL string, cfg sema.OpenConfig) (sema.Backend, error) {
	u, err := url.Parse(rawURL)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: backend URL %q is not a valid URL", sema.ErrInvalidArgument, sema.Redact(rawURL))
	case u.Host != "" || u.User != nil:
		return nil, fmt.Errorf("%w: backend URL %q: file:// takes no host (%q); write file:///abs/dir, with three slashes",
			sema.ErrInvalidArgument, sema.Redact(rawURL), u.Host)
	case u.Opaque != "" || !strings.HasPrefix(u.Path, "/"):
		return nil, fmt.Errorf("%w: backend URL %q: the directory must be an absolute path, as in file:///var/lib/sema",
			sema.ErrInvalidArgument, sema.Redact(rawURL))
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("%w: backend URL %q: file:// takes no query or fragment", sema.ErrInvalidArgument, sema.Redact(rawURL))
	}
	b, err := Open(u.Path, &Config{Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	return b, nil
}
