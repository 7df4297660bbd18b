package remote

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/wire"
)

func TestAppendAcquire_roundTrips(t *testing.T) {
	req := sema.Request{
		Name: "a/\"b\"\\c\u00e9\u2028", ID: "id-1", Owner: "me\tthere", Limit: 3, Weight: 2,
		TTL: 1500*time.Millisecond + 1, Host: "h", PID: 42,
	}
	var got wire.AcquireRequest
	dec := json.NewDecoder(bytes.NewReader(appendAcquire(nil, &req, 250)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := wire.AcquireRequest{Name: req.Name, Limit: 3, Weight: 2, TTLMillis: 1501, Owner: req.Owner,
		ID: "id-1", WaitMillis: 250, Host: "h", PID: 42}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestAppendRenewAndRelease(t *testing.T) {
	var r wire.RenewRequest
	if err := json.Unmarshal(appendRenew(nil, "n", "i", time.Second), &r); err != nil || r != (wire.RenewRequest{Name: "n", ID: "i", TTLMillis: 1000}) {
		t.Fatalf("renew: %+v %v", r, err)
	}
	var f wire.ForceReleaseRequest
	if err := json.Unmarshal(appendNameID(nil, "n", ""), &f); err != nil || f != (wire.ForceReleaseRequest{Name: "n"}) {
		t.Fatalf("force: %+v %v", f, err)
	}
}

// FuzzAppendString checks the hand-written JSON string encoder against
// encoding/json for any input.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", `q"uote\`, "\x00\x1f\x7f", "é€𝄞", "\xff\xfe", "a\u2028b", "<&>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q encodes to invalid JSON %q: %v", s, b, err)
		}
		want := s
		if !utf8.ValidString(s) { // encoding/json's replacement, byte by byte
			rb, _ := json.Marshal(s)
			_ = json.Unmarshal(rb, &want)
		}
		if got != want {
			t.Fatalf("%q round-trips to %q, want %q", s, got, want)
		}
	})
}

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

// FuzzFastLease: whenever the fast decoder accepts an answer, it decodes it
// exactly as encoding/json does.
func FuzzFastLease(f *testing.F) {
	f.Add([]byte(`{"lease":{"name":"n","id":"i","token":7,"owner":"o","weight":1,"limit":2,` +
		`"acquired_at":"2025-01-02T03:04:05.123456789Z","expires_at":"2025-01-02T03:04:20+02:00","ttl_ms":15000,"waited_ms":0.25}}`))
	f.Add([]byte(`   {}`))
	f.Add([]byte(`{"lease":{}}`))
	f.Add([]byte(`{"lease":{"token":01}}`))
	f.Add([]byte(`{"lease":{"waited_ms":1e400}}`))
	f.Add([]byte(`{"lease":{"name":"a\"b"}}`))
	f.Add([]byte(`{"lease":{"acquired_at":"2025-13-02T03:04:05Z"}}`))
	f.Add([]byte(`{"lease":{"name":"a","name":"b"}}`))
	f.Add([]byte(`{"lease":{"name":"a"},"error":{"code":"x"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		// The hints must never change the result, only spare allocations.
		l := &wire.Lease{Name: "n", ID: "i", Owner: "o"}
		empty, ok := fastLease(body, l)
		if !ok {
			return
		}
		var plain wire.Lease
		if e, ok := fastLease(body, &plain); !ok || e != empty || !reflect.DeepEqual(plain, *l) {
			t.Fatalf("%q: hints changed the result: %#v, without %#v", body, *l, plain)
		}
		var env wire.Envelope
		if err := json.Unmarshal(body, &env); err != nil {
			t.Fatalf("fast path accepted %q, encoding/json: %v", body, err)
		}
		if env.Error != nil || empty != (env.Lease == nil) {
			t.Fatalf("%q: fast empty=%v, encoding/json %+v", body, empty, env)
		}
		if empty {
			return
		}
		if !reflect.DeepEqual(*l, *env.Lease) {
			t.Fatalf("%q:\nfast %#v\njson %#v", body, *l, *env.Lease)
		}
	})
}
