package redis

import (
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

func TestDecodeHolder(t *testing.T) {
	h, err := decodeHolder("id1", "h2 1795466085669684 1795466085669 1795466100669 1795466090000 0\x1f42\x1falice\x1fhost-a")
	if err != nil {
		t.Fatal(err)
	}
	want := sema.Holder{ID: "id1", Owner: "alice", Token: 1795466085669684, Weight: 2,
		AcquiredAt: time.UnixMilli(1795466085669), RenewedAt: time.UnixMilli(1795466090000),
		ExpiresAt: time.UnixMilli(1795466100669), Host: "host-a", PID: 42}
	if h.Holder != want || h.revoked {
		t.Fatalf("got %+v, want %+v", h, want)
	}
	for _, bad := range []string{
		"", "h", "w1 2 3 4 5\x1f1\x1fo\x1fh", "h1 2 3 4 5 2\x1f1\x1fo\x1fh", "h0 2 3 4 5 0\x1f1\x1fo\x1fh",
		"h1 2 3 4 5 0\x1f1\x1fo", "h1 2 3 4 5 0\x1f-1\x1fo\x1fh", "h1 x 3 4 5 0\x1f1\x1fo\x1fh",
		"h1 2 3 4 5 0 7\x1f1\x1fo\x1fh", "h1 2 3 4 5 0\x1f1\x1fo\x1fh\x1fextra",
	} {
		if _, err := decodeHolder("x", bad); err == nil {
			t.Errorf("decodeHolder(%q) accepted", bad)
		}
	}
}

func TestLabelRoundTrip(t *testing.T) {
	r := sema.Request{PID: 7, Owner: "o w:n", Host: "h.example"}
	pid, owner, host, err := decodeLabel(label(&r))
	if err != nil || pid != 7 || owner != r.Owner || host != r.Host {
		t.Fatalf("got %d %q %q %v", pid, owner, host, err)
	}
}

// FuzzDecodeStatus feeds the describe decoder answers Redis could give if
// the keys were changed by hand: it must return a status or an error,
// never panic, and never show a holder it could not read.
func FuzzDecodeStatus(f *testing.F) {
	f.Add(int64(1795466085669), ".m", "2 1 1 1 1795466095000 1795466109000 1", "id1", "h1 5 1795466085000 1795466095000 1795466085000 0\x1f1\x1fo\x1fh", "w1", "w1 1795466085000 1795466099000 5000 ch\x1f1\x1fo\x1fh")
	f.Add(int64(0), ".u", "x", "a", "h", "b", "w")
	f.Fuzz(func(t *testing.T, now int64, f1, v1, f2, v2, f3, v3 string) {
		ans := []any{now, []any{f1, v1, f2, v2, f3, v3}, []any{f3, f2}}
		st, err := decodeStatus("n", ans)
		if err != nil {
			if !strings.Contains(err.Error(), "corrupt") {
				t.Fatalf("error %v does not say corrupt", err)
			}
			return
		}
		for _, h := range st.Holders {
			if h.Weight < 1 || !h.ExpiresAt.After(time.UnixMilli(now)) {
				t.Fatalf("decoded holder %+v at now %d", h, now)
			}
		}
		if _, err := decodeStatus("n", []any{now, "x", 3}); err == nil {
			t.Fatal("accepted a malformed answer")
		}
	})
}

// FuzzParseGrant: a wake-up message is a grant only for its own lease ID
// and with four well-formed fields.
func FuzzParseGrant(f *testing.F) {
	f.Add("ID1 1795466085669684 1795466085669 1795466100669")
	f.Add("ID1 1 2")
	f.Add("")
	f.Fuzz(func(t *testing.T, msg string) {
		r := sema.Request{Name: "n", ID: "ID1", Limit: 1, Weight: 1}
		g, ok := parseGrant(&r, msg)
		if ok && (g.ID != "ID1" || !strings.HasPrefix(msg, "ID1 ") || strings.Count(msg, " ") != 3) {
			t.Fatalf("parseGrant(%q) = %+v", msg, g)
		}
	})
}
