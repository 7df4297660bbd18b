package redis

import (
	"strings"
	"testing"
)

func TestEscape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain/name-1.x", "plain/name-1.x"},
		{"a{b}c", "a%7Bb%7Dc"},
		{"*?[]\\", "%2A%3F%5B%5D%5C"},
		{"100%", "100%25"},
		{"sp ace", "sp%20ace"},
		{"é", "%C3%A9"},
	} {
		if got := escape(tc.in); got != tc.want {
			t.Errorf("escape(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestNamesNeverBreakTheKeySpace(t *testing.T) {
	ks := keyspace{"sema:"}
	for _, name := range []string{"}:s", "{x}", "a}{b", "../../etc", "*", "x}:s\x00", "sema:{y}:t"} {
		keys := ks.keys(name)
		for _, k := range keys {
			// One hash tag, the name's: the first '{' opens it, the first
			// '}' after it closes it, and nothing of the name is a brace.
			open, close := strings.IndexByte(k, '{'), strings.IndexByte(k, '}')
			if open != len("sema:") || close != len(k)-3 || strings.Count(k, "{")+strings.Count(k, "}") != 2 {
				t.Errorf("name %q: key %q breaks the tag", name, k)
			}
		}
		if got, err := ks.nameOf(keys[0]); name != "x}:s\x00" && (err != nil || got != name) {
			t.Errorf("nameOf(%q) = %q, %v; want %q", keys[0], got, err, name)
		}
	}
}

func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "a", "{}", "%", "%41", "é", "\x00\xff", "*?[x]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := escape(s)
		if strings.ContainsAny(e, "{}*?[]\\ \x00") {
			t.Fatalf("escape(%q) = %q holds a forbidden byte", s, e)
		}
		back, err := unescape(e)
		if err != nil || back != s {
			t.Fatalf("unescape(escape(%q)) = %q, %v", s, back, err)
		}
		if p := s[:len(s)/2]; !strings.HasPrefix(e, escape(p)) {
			t.Fatalf("escape(%q) = %q does not start with escape(%q) = %q", s, e, p, escape(p))
		}
		// unescape never accepts what escape would not produce.
		if u, err := unescape(s); err == nil && escape(u) != s {
			t.Fatalf("unescape(%q) = %q, but escape gives %q", s, u, escape(u))
		}
	})
}

func TestValidPrefix(t *testing.T) {
	for _, p := range []string{"sema:", "app/locks:", "x"} {
		if err := validPrefix(p); err != nil {
			t.Errorf("validPrefix(%q): %v", p, err)
		}
	}
	for _, p := range []string{"", "a{", "}", "a b", "x*", strings.Repeat("p", 65)} {
		if err := validPrefix(p); err == nil {
			t.Errorf("validPrefix(%q) accepted", p)
		}
	}
}
