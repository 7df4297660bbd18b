package postgres

import (
	"strconv"
	"strings"
	"testing"
)

func TestParsePayload(t *testing.T) {
	gs, err := parsePayload("AbC-1_x,42,1700000000123456 ID2,43,1700000000123999")
	if err != nil || len(gs) != 2 || gs[0] != (grantMsg{"AbC-1_x", 42, 1700000000123456}) || gs[1].id != "ID2" || gs[1].token != 43 {
		t.Fatalf("parsePayload = %+v, %v", gs, err)
	}
	for _, bad := range []string{
		"", "probe", "id,1", "id,1,2,3", "id,0,5", "id,-1,5", "id,1,0", "id,x,5", "id,1,5 ", " id,1,5",
		"id,1,5  id2,1,5", "../x,1,5", "id,1,99999999999999999999", strings.Repeat("a", 65) + ",1,5",
		strings.Repeat("id,1,5 ", 2000) + "id,1,5",
	} {
		if gs, err := parsePayload(bad); err == nil {
			t.Errorf("parsePayload(%q) = %+v, want an error", bad, gs)
		}
	}
}

// FuzzParsePayload: parsePayload never panics, and what it accepts is
// valid grants that print back to the same payload.
func FuzzParsePayload(f *testing.F) {
	f.Add("AbC-1_x,42,1700000000123456 ID2,43,1700000000123999")
	f.Add("a,1,1")
	f.Add("a,1,1 b,2")
	f.Fuzz(func(t *testing.T, p string) {
		gs, err := parsePayload(p)
		if err != nil {
			return
		}
		parts := make([]string, len(gs))
		for i, g := range gs {
			if g.token < 1 || g.acquired < 1 || g.id == "" {
				t.Fatalf("parsePayload(%q) accepted %+v", p, g)
			}
			parts[i] = g.id + "," + strconv.FormatInt(g.token, 10) + "," + strconv.FormatInt(g.acquired, 10)
		}
		if back := strings.Join(parts, " "); back != p {
			t.Fatalf("parsePayload(%q) read %+v, which prints as %q", p, gs, back)
		}
	})
}
