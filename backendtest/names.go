package backendtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sema-dev/sema"
)

// oddNames look like paths, URLs, SQL, Redis patterns and hash tags, glob
// and LIKE patterns, or differ only in case, spacing or Unicode
// normalisation. A backend that puts names into paths, keys, patterns or
// queries unescaped mixes them up, escapes its directory or breaks.
var oddNames = []string{
	"../../etc/passwd", "..", ".", "a/b", "a/b/../c", "/abs", `C:\Windows\x`, `\`,
	"%2F", "%2F..%2F", "%", "_", "a%b_c",
	"'; DROP TABLE x; --", `" OR 1=1 --`, "$1", "{tag}", "{tag}x",
	"*", "?", "[ab]", "a", "a ", "a  b", "x:y:z", "#frag?q=1&r=2", "~",
	"Case", "case", "é", "e\u0301", "ünïcödé/日本語/🔒",
}

// testNames: every odd name is a name of its own on every backend: held at
// the same time as all the others, described, listed by prefix exactly,
// and released.
func testNames(t *testing.T, e *env) {
	names := make([]string, 0, len(oddNames)+1)
	for _, n := range oddNames {
		names = append(names, e.name(n))
	}
	long := e.prefix + strings.Repeat("é", (sema.MaxNameLen-len(e.prefix))/2)
	long += strings.Repeat("x", sema.MaxNameLen-len(long))
	names = append(names, long)
	if err := sema.ValidateName(long); err != nil || len(long) != sema.MaxNameLen {
		t.Fatalf("the long name is %d bytes: %v", len(long), err)
	}
	ctx := e.ctx(hang)
	leases := make([]*sema.Lease, len(names))
	for i, n := range names {
		l, err := e.client(i).Mutex(n).TryAcquire(ctx, sema.WithOwner(fmt.Sprintf("owner %d", i)))
		if err != nil {
			t.Fatalf("TryAcquire(%q) while the other odd names are held: %v (two names share state?)", n, err)
		}
		leases[i] = l
	}
	for i, n := range names {
		st := e.describe(n)
		if st.Name != n || len(st.Holders) != 1 || st.Holders[0].Token != leases[i].Token() || st.Holders[0].Owner != fmt.Sprintf("owner %d", i) {
			t.Errorf("Describe(%q) = %+v; want its one holder, token %d", n, st, leases[i].Token())
		}
	}
	in := e.inspector()
	sorted := slices.Sorted(slices.Values(names))
	for _, prefix := range append([]string{e.prefix}, names...) {
		var want []string
		for _, n := range sorted {
			if strings.HasPrefix(n, prefix) {
				want = append(want, n)
			}
		}
		all, err := in.List(ctx, prefix)
		if err != nil {
			t.Fatalf("List(%q): %v", prefix, err)
		}
		got := make([]string, 0, len(all))
		for _, st := range all {
			got = append(got, st.Name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("List(%q) = %q;\nwant %q", prefix, got, want)
		}
	}
	for i, l := range leases {
		if fr, ok := e.b.(sema.ForceReleaser); ok && i == 0 {
			if hs, err := fr.ForceRelease(ctx, names[i], "", sema.ForceOptions{Now: true}); err != nil || len(hs) != 1 || hs[0].Token != l.Token() {
				t.Errorf("ForceRelease(%q) = %+v, %v", names[i], hs, err)
			}
			_ = l.Release(ctx)
			continue
		}
		e.mustRelease(l)
	}
	for _, n := range names {
		if st := e.describe(n); len(st.Holders) != 0 || len(st.Waiters) != 0 {
			t.Errorf("Describe(%q) after release = %+v", n, st)
		}
	}
	if all, err := in.List(ctx, e.prefix); err != nil || len(all) != 0 {
		t.Errorf("List after release = %+v, %v; want none", all, err)
	}
}
