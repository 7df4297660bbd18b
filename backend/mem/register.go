package mem

import (
	"context"
	"fmt"
	"strings"

	"github.com/sema-dev/sema"
)

func init() { sema.Register("mem", openURL) }

// openURL opens "mem://" for sema.Open: a new, empty backend each time.
func openURL(_ context.Context, rawURL string, _ sema.OpenConfig) (sema.Backend, error) {
	if !strings.EqualFold(rawURL, "mem://") {
		return nil, fmt.Errorf("%w: backend URL %q: mem:// takes no host, path or query", sema.ErrInvalidArgument, sema.Redact(rawURL))
	}
	return New(), nil
}
