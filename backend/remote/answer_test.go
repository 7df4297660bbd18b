package remote

import (
	"bytes"
	"errors"
	"testing"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/wire"
)

// FuzzAnswer feeds arbitrary server answers to the decoder: never a panic,
// always an error wrapping a sema sentinel or one of ours, or a lease.
func FuzzAnswer(f *testing.F) {
	f.Add(200, []byte(`{"lease":{"name":"n","id":"i","token":7,"ttl_ms":100,"waited_ms":1.5}}`))
	f.Add(200, []byte(`     {"error":{"code":"not_acquired","holders":[{"owner":"o","token":1,"weight":1}],"limit":1}}`))
	f.Add(410, []byte(`{"error":{"code":"lease_lost","reason":"force_released","message":"gone"}}`))
	f.Add(502, []byte(`<html>bad gateway</html>`))
	f.Add(200, []byte(`{}`))
	f.Add(200, []byte(`{"lease":{"waited_ms":1e308}}`))
	f.Add(404, []byte(`{"error":{"code":"not_held"}}`))
	f.Add(401, []byte(`{"error":{"code":"unauthorized","message":"no token"}}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		l := wire.Lease{Name: "n"}
		found, err := decodeLease("acquire", "n", status, body, &l)
		if err == nil {
			if status != 200 {
				t.Fatalf("status %d accepted", status)
			}
			if found {
				g := grantOf(&l)
				if g.Waited < 0 || g.Waited > sema.MaxTTL {
					t.Fatalf("waited %v", g.Waited)
				}
			}
			return
		}
		for _, s := range []error{sema.ErrNotAcquired, sema.ErrLimitMismatch, sema.ErrLeaseLost, sema.ErrNotHeld,
			sema.ErrInvalidName, sema.ErrInvalidArgument, sema.ErrUnavailable, ErrUnauthorized, ErrForbidden} {
			if errors.Is(err, s) {
				return
			}
		}
		t.Fatalf("error wraps no sentinel: %v", err)
	})
}

func TestAPIError_mapsEveryCode(t *testing.T) {
	for code, want := range map[string]error{
		wire.CodeNotAcquired: sema.ErrNotAcquired, wire.CodeLimitMismatch: sema.ErrLimitMismatch,
		wire.CodeLeaseLost: sema.ErrLeaseLost, wire.CodeNotHeld: sema.ErrNotHeld,
		wire.CodeInvalidName: sema.ErrInvalidName, wire.CodeInvalidArgument: sema.ErrInvalidArgument,
		wire.CodeBadRequest: sema.ErrInvalidArgument, wire.CodeTooLarge: sema.ErrInvalidArgument,
		wire.CodeUnauthorized: ErrUnauthorized, wire.CodeForbidden: ErrForbidden,
		wire.CodeNotFound: sema.ErrUnavailable, wire.CodeMethod: sema.ErrUnavailable,
		wire.CodeUnavailable: sema.ErrUnavailable, wire.CodeClosed: sema.ErrUnavailable,
		wire.CodeInternal: sema.ErrUnavailable, "from-the-future": sema.ErrUnavailable,
	} {
		if err := apiError("op", "n", &wire.Error{Code: code}); !errors.Is(err, want) {
			t.Errorf("%s → %v, want %v", code, err, want)
		}
	}
	if _, ok := wire.HTTPStatus["x"]; ok {
		t.Fatal("unexpected code")
	}
	for code := range wire.HTTPStatus {
		if err := apiError("op", "n", &wire.Error{Code: code}); err == nil {
			t.Errorf("%s: nil", code)
		}
	}
	err := apiError("renew", "n", &wire.Error{Code: wire.CodeLeaseLost, Reason: wire.ReasonForceReleased})
	if !errors.Is(err, sema.ErrForceReleased) {
		t.Fatalf("force_released → %v", err)
	}
	// A server's message that ends with the sentinel is not followed by it
	// a second time; one that does not is.
	err = apiError("release", "n", &wire.Error{Code: wire.CodeNotHeld, Message: `store: release "n": sema: not held`})
	if want := `remote: release "n": store: release "n": sema: not held`; err.Error() != want || !errors.Is(err, sema.ErrNotHeld) {
		t.Errorf("not_held with the sentinel in the message → %q, want %q", err, want)
	}
	err = apiError("release", "n", &wire.Error{Code: wire.CodeNotHeld, Message: "no such lease"})
	if want := `remote: release "n": no such lease: sema: not held`; err.Error() != want {
		t.Errorf("not_held → %q, want %q", err, want)
	}
	var held *sema.HeldError
	err = apiError("acquire", "n", &wire.Error{Code: wire.CodeNotAcquired, Limit: 2, Waiters: 3,
		Holders: []sema.Holder{{Owner: "o", Token: 9, Weight: 2}}})
	if !errors.As(err, &held) || held.Limit != 2 || held.Waiters != 3 || len(held.Holders) != 1 || held.Holders[0].Token != 9 {
		t.Fatalf("not_acquired → %#v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	good := []string{"http://127.0.0.1:7411", "https://h.example/", "http://[::1]:80/prefix/", "HTTP://h"}
	bad := []string{"", "ftp://h", "http://", "http://u:p@h", "http://h?token=x", "http://h#f",
		"http://h:0", "http://h:99999", "http:opaque", "http://:80", "://", "http://h:p"}
	for _, u := range good {
		c := Config{URL: u}
		if err := c.Validate(); err != nil {
			t.Errorf("%q: %v", u, err)
		}
	}
	for _, u := range bad {
		c := Config{URL: u}
		err := c.Validate()
		if !errors.Is(err, sema.ErrInvalidArgument) {
			t.Errorf("%q: %v, want invalid argument", u, err)
		} else if bytes.Contains([]byte(err.Error()), []byte("p@")) {
			t.Errorf("%q: error leaks user info: %v", u, err)
		}
	}
	c := Config{URL: "http://h", Token: "a\nb"}
	if err := c.Validate(); !errors.Is(err, sema.ErrInvalidArgument) {
		t.Errorf("token with newline: %v", err)
	}
	c = Config{URL: "http://h", RequestTimeout: -1}
	if err := c.Validate(); !errors.Is(err, sema.ErrInvalidArgument) {
		t.Errorf("negative timeout: %v", err)
	}
}
