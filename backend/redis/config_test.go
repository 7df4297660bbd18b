package redis

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

func TestParseURL(t *testing.T) {
	c, err := ParseURL("rediss://user:pw@example.com:6380/3?recheck=250ms&prefix=app:&dial_timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	if c.Single == nil || c.Single.Addr != "example.com:6380" || c.Single.DB != 3 || c.Single.Password != "pw" ||
		c.Single.TLSConfig == nil || c.Single.DialTimeout != 2*time.Second || c.Recheck != 250*time.Millisecond || c.Prefix != "app:" {
		t.Fatalf("got %+v / %+v", c, c.Single)
	}
	c, err = ParseURL("redis://a:1?cluster=true&wait_replicas=2&wait_timeout=100ms")
	if err != nil || c.Cluster == nil || len(c.Cluster.Addrs) != 1 || c.WaitReplicas != 2 || c.WaitTimeout != 100*time.Millisecond {
		t.Fatalf("cluster=true: %+v, %v", c, err)
	}
	for _, bad := range []string{
		"", "redis:", "http://x", "redis://", "redis://h:1/x", "redis://h:1?nosuch=1", "redis://h:1?recheck=1ms",
		"redis://h:1?recheck=-1s", "redis://h:1?wait_replicas=x", "redis://h:1?wait_replicas=-1", "redis://h:1?wait_timeout=0s",
		"redis://h:1?prefix=a{b", "redis://h:1?prefix=", "redis://h:1?cluster=maybe", "redis://h:1/2?addr=h:2",
		"redis://h:1#frag", "redis://h:1?wait_replicas=1&wait_timeout=5s", "redis://h:1?%zz",
		"redis://h:0", "redis://h:99999/0", "redis://h:1?addr=h:70000", "redis://h:65536?cluster=true",
	} {
		if _, err := ParseURL(bad); !errors.Is(err, sema.ErrInvalidArgument) {
			t.Errorf("ParseURL(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"redis://127.0.0.1:6379/0", "rediss://u:p@h:1/2?prefix=x:", "redis://h?addr=h2&addr=h3",
		"redis://h:1?recheck=1s&wait_replicas=1", "redis://:secret@h/0?pool_size=3",
		"redis://:secret@h:1?recheck=x", "redis://u:secret@h:1/x", "redis://:secret@h:1?nosuch=1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := ParseURL(raw)
		if err != nil {
			if !errors.Is(err, sema.ErrInvalidArgument) {
				t.Fatalf("ParseURL(%q): %v does not wrap ErrInvalidArgument", raw, err)
			}
			// The URL's userinfo with its password never shows (the same
			// characters elsewhere in the URL, such as in its path, may).
			if u, perr := url.Parse(raw); perr == nil && u.User != nil {
				userinfo := u.User.String() + "@"
				if _, ok := u.User.Password(); ok && !strings.Contains(u.Redacted(), userinfo) &&
					strings.Contains(err.Error(), userinfo) {
					t.Fatalf("error repeats the password: %v", err)
				}
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("ParseURL(%q) gave an invalid config: %v", raw, err)
		}
	})
}
