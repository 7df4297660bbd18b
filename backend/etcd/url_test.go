package etcd

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

func TestParseURL(t *testing.T) {
	good := []struct {
		url  string
		want Config
		tls  bool
	}{
		{"etcd://h1", Config{Endpoints: []string{"h1:2379"}}, false},
		{"etcd://h1:1234,h2,[::1]:5/app/locks?dial-timeout=2s&request-timeout=3s&waiter-ttl=20s&recheck=500ms",
			Config{Endpoints: []string{"h1:1234", "h2:2379", "[::1]:5"}, Prefix: "app/locks", DialTimeout: 2 * time.Second,
				RequestTimeout: 3 * time.Second, WaiterTTL: 20 * time.Second, Recheck: 500 * time.Millisecond}, false},
		{"etcd://u:p%40ss@127.0.0.1:2379/x", Config{Endpoints: []string{"127.0.0.1:2379"}, Prefix: "x", Username: "u", Password: "p@ss"}, false},
		{"ETCDS://h/", Config{Endpoints: []string{"h:2379"}}, true},
		{"etcd://[::1]", Config{Endpoints: []string{"[::1]:2379"}}, false},
	}
	for _, tc := range good {
		got, err := ParseURL(tc.url)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", tc.url, err)
			continue
		}
		if (got.TLS != nil) != tc.tls {
			t.Errorf("ParseURL(%q): TLS %v, want %v", tc.url, got.TLS != nil, tc.tls)
		}
		got.TLS = nil
		if !slices.Equal(got.Endpoints, tc.want.Endpoints) || got.Prefix != tc.want.Prefix || got.Username != tc.want.Username ||
			got.Password != tc.want.Password || got.DialTimeout != tc.want.DialTimeout || got.RequestTimeout != tc.want.RequestTimeout ||
			got.WaiterTTL != tc.want.WaiterTTL || got.Recheck != tc.want.Recheck {
			t.Errorf("ParseURL(%q) = %+v, want %+v", tc.url, got, tc.want)
		}
	}
	bad := []string{
		"", "etcd:", "http://h", "etcd://", "etcd://h,", "etcd://h:0", "etcd://h:99999", "etcd://h:x", "etcd://h/a//b/",
		"etcd://h?bogus=1", "etcd://h?dial-timeout=-1s", "etcd://h?dial-timeout=1h", "etcd://h?recheck=1s&recheck=2s",
		"etcd://h?cacert=/x", "etcds://h?cert=/x", "etcd://:pw@h", "etcd://h#frag", "etcd://h/pre fix", "etcd://h%20x",
		"etcd://[::1", "etcd://h/" + strings.Repeat("p", 200),
	}
	for _, u := range bad {
		if _, err := ParseURL(u); !errors.Is(err, sema.ErrInvalidArgument) {
			t.Errorf("ParseURL(%q): %v, want ErrInvalidArgument", u, err)
		}
	}
	if _, err := ParseURL("etcds://h?cacert=/nonexistent/ca.pem"); !errors.Is(err, sema.ErrInvalidArgument) {
		t.Errorf("missing CA file: %v", err)
	}
	// The password never shows in errors.
	if _, err := ParseURL("etcd://u:hunter2@h?bogus=1"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error shows the password: %v", err)
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"etcd://h1:1,h2/p?dial-timeout=1s", "etcds://u:p@[::1]:2/x/y?recheck=5ms", "etcd://h?cert=a&key=b", "etcd://%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c, _, err := parseURL(raw)
		if err != nil {
			if !errors.Is(err, sema.ErrInvalidArgument) {
				t.Fatalf("parseURL(%q): error %v does not wrap ErrInvalidArgument", raw, err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("parseURL(%q) accepted an invalid config: %v", raw, err)
		}
		_ = Redact(raw)
	})
}

func FuzzEscapeName(f *testing.F) {
	for _, s := range []string{"a", "a/b", "%2F", "x%y/z", "ünï/cödé", "\x7f"} {
		f.Add(s, "a/")
	}
	f.Fuzz(func(t *testing.T, name, prefix string) {
		e := escapeName(name)
		if strings.Contains(e, "/") {
			t.Fatalf("escapeName(%q) = %q contains /", name, e)
		}
		back, err := unescapeName(e)
		if err != nil || back != name {
			t.Fatalf("unescapeName(escapeName(%q)) = %q, %v", name, back, err)
		}
		if strings.HasPrefix(name, prefix) != strings.HasPrefix(e, escapeName(prefix)) {
			t.Fatalf("prefix %q of %q not kept by escaping (%q, %q)", prefix, name, escapeName(prefix), e)
		}
		_, _ = unescapeName(name) // arbitrary input: an error, never a panic
	})
}

// FuzzDecodeEntry feeds keys and values of any shape to the decoder of
// what etcd holds: it never panics, and what it accepts is usable.
func FuzzDecodeEntry(f *testing.F) {
	k := newKeys("p")
	f.Add("p/q/a%2Fb/00000003/0123456789abcdef", `{"i":"ABC","w":2,"t":1000,"s":1}`)
	f.Add("p/q/a/00000001/0123456789abcdef", "garbage")
	f.Add("p/q/x/0000000g/0123456789abcdef", `{}`)
	f.Fuzz(func(t *testing.T, key, val string) {
		name, e, ok := k.decodeEntry(&mvccpb.KeyValue{Key: []byte(key), Value: []byte(val), CreateRevision: 5})
		if !ok {
			return
		}
		if e.val.Weight < 1 || e.val.Weight > e.limit {
			t.Fatalf("decoded weight %d out of [1, %d]", e.val.Weight, e.limit)
		}
		if !e.broken && sema.ValidateID(e.id) != nil {
			t.Fatalf("decoded a bad lease id %q", e.id)
		}
		if !strings.HasPrefix(key, k.nameDir(name)) {
			t.Fatalf("name %q does not lead to key %q", name, key)
		}
	})
}
