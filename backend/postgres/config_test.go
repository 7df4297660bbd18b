package postgres_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/postgres"
)

func TestParseURL(t *testing.T) {
	good := []struct {
		in                     string
		url, listen, schema, p string
	}{
		{"postgres://u@h:5432/db", "postgres://u@h:5432/db", "", "", ""},
		{"postgresql://u:pw@h/db?sslmode=disable&pool_max_conns=8", "postgresql://u:pw@h/db?pool_max_conns=8&sslmode=disable", "", "", ""},
		{"postgres://u@bouncer:6432/db?sema_listen=db1:5432&sslmode=disable", "postgres://u@bouncer:6432/db?sslmode=disable",
			"postgres://u@db1:5432/db?sslmode=disable", "", ""},
		{"postgres://u@h/db?sema_listen=db1", "postgres://u@h/db", "postgres://u@db1/db", "", ""},
		{"postgres://u@h/db?sema_listen=[::1]:5433", "postgres://u@h/db", "postgres://u@[::1]:5433/db", "", ""},
		{"postgres://u@h/db?sema_schema=locks&sema_prefix=app_", "postgres://u@h/db", "", "locks", "app_"},
		{"POSTGRES://u@h/db", "postgres://u@h/db", "", "", ""},
	}
	for _, tc := range good {
		cfg, err := postgres.ParseURL(tc.in)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", tc.in, err)
			continue
		}
		if cfg.URL != tc.url || cfg.ListenURL != tc.listen || cfg.Schema != tc.schema || cfg.TablePrefix != tc.p {
			t.Errorf("ParseURL(%q) = %+v", tc.in, cfg)
		}
	}
	bad := []string{
		"",
		"postgres",
		"mysql://u@h/db",
		"postgres:opaque",
		"postgres://u@h/db#frag",
		"postgres://u@h/db?sema_schema=a;drop",
		"postgres://u@h/db?sema_schema=1abc",
		"postgres://u@h/db?sema_schema=",
		"postgres://u@h/db?sema_prefix=a\"b",
		"postgres://u@h/db?sema_prefix=" + strings.Repeat("p", 60),
		"postgres://u@h/db?sema_prefix=a&sema_prefix=b",
		"postgres://u@h/db?sema_listen=",
		"postgres://u@h/db?sema_listen=a/b",
		"postgres://u@h/db?sema_listen=h:1:2",
		"postgres://u@h/db?sema_lsten=h",
		"postgres://u:secret@h/db?%zz",
	}
	for _, in := range bad {
		_, err := postgres.ParseURL(in)
		if !errors.Is(err, sema.ErrInvalidArgument) {
			t.Errorf("ParseURL(%q) = %v, want ErrInvalidArgument", in, err)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseURL(%q): the error shows the password: %v", in, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []postgres.Config{
		{},
		{URL: "postgres://h/db", Schema: "bad name"},
		{URL: "postgres://h/db", Schema: strings.Repeat("s", 64)},
		{URL: "postgres://h/db", TablePrefix: "x-"},
		{URL: "postgres://h/db", Recheck: time.Millisecond},
		{URL: "postgres://h/db", Recheck: time.Second, WaiterTTL: 2 * time.Second},
		{URL: "postgres://h/db", WaiterTTL: time.Hour},
		{URL: "postgres://h/db", Sweep: time.Millisecond},
	}
	for _, c := range bad {
		if err := c.Validate(); !errors.Is(err, sema.ErrInvalidArgument) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidArgument", c, err)
		}
	}
	if err := (postgres.Config{URL: "postgres://h/db", Recheck: 50 * time.Millisecond}).Validate(); err != nil {
		t.Errorf("a short Recheck with the default WaiterTTL: %v", err)
	}
	if err := openErr(postgres.Config{URL: "postgres://h/db?port=notaport"}); !errors.Is(err, sema.ErrInvalidArgument) {
		t.Errorf("Open with a URL pgx cannot parse: %v", err)
	}
}

func hasSemaParam(q url.Values) bool {
	for k := range q {
		if strings.HasPrefix(k, "sema_") {
			return true
		}
	}
	return false
}

// FuzzParseURL: any string is either a config that validates or an
// ErrInvalidArgument that does not quote a password.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"postgres://u:pw@h:5432/db?sslmode=disable",
		"postgresql://h/db?sema_listen=db1:5432&sema_schema=s&sema_prefix=p_",
		"postgres://u@[::1]/db?sema_listen=[::1]:1",
		"postgres://%zz@h/db",
		"postgres://u@h/db?sema_prefix=%22",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := postgres.ParseURL(s)
		if err != nil {
			if !errors.Is(err, sema.ErrInvalidArgument) {
				t.Fatalf("ParseURL(%q): %v is not ErrInvalidArgument", s, err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("ParseURL(%q) gave a config that does not validate: %v", s, err)
		}
		for _, u := range []string{cfg.URL, cfg.ListenURL} {
			if pu, err := url.Parse(u); u != "" && (err != nil || hasSemaParam(pu.Query())) {
				t.Fatalf("ParseURL(%q) gave %q for pgx (%v)", s, u, err)
			}
		}
	})
}
