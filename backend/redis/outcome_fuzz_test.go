package redis

import (
	"errors"
	"testing"

	"github.com/sema-dev/sema"
)

// FuzzDecodeOutcome feeds the acquire decoder answers a replaced script
// or keys changed by hand could give: it returns an outcome or an error
// wrapping ErrCorrupt (and so sema.ErrUnavailable), never panics, and
// never returns a grant with a token of 0 or one that expires before it
// was made.
func FuzzDecodeOutcome(f *testing.F) {
	f.Add(int64(granted), int64(1795466085669684), int64(1795466085669), int64(1795466095669), int64(1795466085669), "", "")
	f.Add(int64(queued), int64(1795466085669), int64(2), int64(noneExpires), int64(0), "", "")
	f.Add(int64(held), int64(3), int64(1), int64(0), int64(0), "id1", "h1 5 1795466085000 1795466095000 1795466085000 0\x1f1\x1fo\x1fh")
	f.Add(int64(mismatch), int64(2), int64(0), int64(0), int64(0), "", "")
	f.Add(int64(forceFreed), int64(0), int64(0), int64(0), int64(0), "", "")
	f.Add(int64(granted), int64(-1), int64(5), int64(4), int64(0), "", "")
	f.Fuzz(func(t *testing.T, kind, n1, n2, n3, n4 int64, id, rec string) {
		req := sema.Request{Name: "n", ID: "ID1", Limit: 3, Weight: 1}
		for _, v := range []any{
			[]any{kind, n1, n2, n3, n4},
			[]any{kind, n1, n2, id, rec},
			[]any{kind, n1, n2, n3, id, rec},
			[]any{kind, n1},
			[]any{kind, id, rec},
			kind,
		} {
			o, err := decodeOutcome(&req, v)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) || !errors.Is(err, sema.ErrUnavailable) {
					t.Fatalf("decodeOutcome(%#v): %v wraps no ErrCorrupt", v, err)
				}
				continue
			}
			switch o.kind {
			case granted:
				if o.grant.Token == 0 || o.grant.Token > 1<<63-1 || !o.grant.ExpiresAt.After(o.grant.AcquiredAt) {
					t.Fatalf("decodeOutcome(%#v) granted %+v", v, o.grant)
				}
			case held:
				if o.held == nil {
					t.Fatalf("decodeOutcome(%#v): held without holders", v)
				}
				for _, h := range o.held.Holders {
					if h.Weight < 1 {
						t.Fatalf("decodeOutcome(%#v): holder %+v", v, h)
					}
				}
			}
		}
	})
}
