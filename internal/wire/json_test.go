package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sema-dev/sema"
)

// FuzzDecode checks that the fast decoders accept only bodies that
// encoding/json (strict) accepts, with the same result, and that Decode
// gives the strict result whichever path it takes.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"name":"a","ttl_ms":30000}`,
		`{"name":"bench/x","ttl_ms":30000,"wait_ms":60000,"id":"ABC","owner":"me","host":"h","pid":12,"limit":3,"weight":2}`,
		` { "name" : "a" , "id" : "b" } `,
		`{"name":"a","id":"b","ttl_ms":-5}`,
		`{"Name":"a"}`, `{"name":"a","name":"b"}`, `{"name":"\u00e9"}`, `{"name":"é"}`, "{\"name\":\"\xff\"}",
		`{"name":null}`, `{"ttl_ms":1.5}`, `{"ttl_ms":1e3}`, `{"ttl_ms":01}`, `{"ttl_ms":-0}`,
		`{"ttl_ms":99999999999999999999}`, `{"pid":"1"}`, `{"x":1}`, `{}`, `{} {}`, `{,}`, `{"name":"a",}`, ``, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fa, sa AcquireRequest
		if fastAcquire(b, &fa) {
			if err := decodeStrict(b, &sa); err != nil || fa != sa {
				t.Fatalf("acquire %q: fast %+v, strict %+v (%v)", b, fa, sa, err)
			}
		}
		var fr, sr RenewRequest
		if fastRenew(b, &fr) {
			if err := decodeStrict(b, &sr); err != nil || fr != sr {
				t.Fatalf("renew %q: fast %+v, strict %+v (%v)", b, fr, sr, err)
			}
		}
		var fl, sl ReleaseRequest
		if fastRelease(b, &fl) {
			if err := decodeStrict(b, &sl); err != nil || fl != sl {
				t.Fatalf("release %q: fast %+v, strict %+v (%v)", b, fl, sl, err)
			}
		}
		var da, ta AcquireRequest
		derr, serr := Decode(b, &da), decodeStrict(b, &ta)
		if (derr == nil) != (serr == nil) || da != ta {
			t.Fatalf("Decode %q: %+v %v, strict %+v %v", b, da, derr, ta, serr)
		}
		if derr != nil && (!errors.Is(derr, ErrMalformed) || !errors.Is(derr, sema.ErrInvalidArgument)) {
			t.Fatalf("Decode %q: error %v wraps neither ErrMalformed nor ErrInvalidArgument", b, derr)
		}
	})
}

// TestFastDecodeUsed checks that the plain bodies clients send take the
// fast path (else its speed-up is silently gone).
func TestFastDecodeUsed(t *testing.T) {
	var a AcquireRequest
	if !fastAcquire([]byte(`{"name":"n","limit":1,"weight":1,"ttl_ms":15000,"id":"X","wait_ms":5}`), &a) || a.WaitMillis != 5 {
		t.Fatalf("acquire not fast: %+v", a)
	}
	var r ReleaseRequest
	if !fastRelease([]byte(`{"name":"n","id":"X"}`+"\n"), &r) || r.ID != "X" {
		t.Fatalf("release not fast: %+v", r)
	}
	for _, s := range []string{`{"name":"n","x":1}`, `{"Name":"n"}`, `{"name":"n","name":"m"}`} {
		if fastRelease([]byte(s), &r) {
			t.Fatalf("fast path accepted %s", s)
		}
	}
	// What the encoders write, the fast decoders read.
	in := AcquireRequest{Name: "é/n", Limit: 3, Weight: 2, TTLMillis: 1500, Owner: "o", ID: "X", WaitMillis: 9, Host: "h", PID: 7}
	var out AcquireRequest
	if !fastAcquire(in.Append(nil), &out) || out != in {
		t.Fatalf("acquire %s not decoded fast: %+v", in.Append(nil), out)
	}
	rn := RenewRequest{Name: "n", ID: "X", TTLMillis: 100}
	var rout RenewRequest
	if !fastRenew(rn.Append(nil), &rout) || rout != rn {
		t.Fatalf("renew not decoded fast: %+v", rout)
	}
}

// FuzzAppendString checks the string encoder against encoding/json for
// any input.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", `q"uote\`, "\x00\x1f\x7f", "é€𝄞", "\xff\xfe", "a\u2028b", "<&>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := AppendString(nil, s)
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

// FuzzRequestEncoding: the request encoders decode (strictly) to what
// they encoded.
func FuzzRequestEncoding(f *testing.F) {
	f.Add("a/\"b\"\\c\u00e9\u2028", "id-1", "me\tthere", "h", int64(3), int64(2), int64(1501), int64(250), 42)
	f.Add("", "", "", "", int64(0), int64(0), int64(0), int64(0), 0)
	f.Fuzz(func(t *testing.T, name, id, owner, host string, limit, weight, ttl, wait int64, pid int) {
		valid := func(s string) string { return string([]rune(s)) } // invalid UTF-8 → U+FFFD, as encoding/json
		a := AcquireRequest{Name: name, ID: id, Owner: owner, Host: host, Limit: limit, Weight: weight,
			TTLMillis: ttl, WaitMillis: wait, PID: pid}
		var got AcquireRequest
		if err := decodeStrict(a.Append(nil), &got); err != nil {
			t.Fatalf("%+v encodes to %s: %v", a, a.Append(nil), err)
		}
		a.Name, a.ID, a.Owner, a.Host = valid(name), valid(id), valid(owner), valid(host)
		if got != a {
			t.Fatalf("acquire: got %+v, want %+v", got, a)
		}
		r := RenewRequest{Name: name, ID: id, TTLMillis: ttl}
		var gr RenewRequest
		if err := decodeStrict(r.Append(nil), &gr); err != nil || gr != (RenewRequest{valid(name), valid(id), ttl}) {
			t.Fatalf("renew: %+v %v", gr, err)
		}
		fr := ForceReleaseRequest{Name: name, ID: id, Now: ttl%2 == 0, By: owner}
		var gf ForceReleaseRequest
		if err := decodeStrict(fr.Append(nil), &gf); err != nil || gf != (ForceReleaseRequest{valid(name), valid(id), fr.Now, valid(owner)}) {
			t.Fatalf("force-release: %+v %v", gf, err)
		}
	})
}

// FuzzLeaseEncoding: the lease encoder decodes to what encoding/json's
// encoding would.
func FuzzLeaseEncoding(f *testing.F) {
	f.Add("name", "ID", "owner\"\\\n\u2028", uint64(7), int64(1), int64(3), int64(1700000000123456789), int64(15000), 1.5)
	f.Add("", "", "\xff", uint64(0), int64(-1), int64(0), int64(0), int64(0), 0.0)
	f.Fuzz(func(t *testing.T, name, id, owner string, tok uint64, w, lim, at, ttl int64, waited float64) {
		l := Lease{Name: name, ID: id, Owner: owner, Token: tok, Weight: w, Limit: lim,
			AcquiredAt: time.Unix(0, at).UTC(), ExpiresAt: time.Unix(0, at).Add(time.Second), TTLMillis: ttl, WaitedMillis: waited}
		if waited != waited || waited < 0 || waited > 1e20 {
			l.WaitedMillis = 0
		}
		var got, want Envelope
		if err := json.Unmarshal(AppendLease(nil, &l), &got); err != nil {
			t.Fatalf("own encoding does not decode: %v: %s", err, AppendLease(nil, &l))
		}
		std, _ := json.Marshal(Envelope{Lease: &l})
		if err := json.Unmarshal(std, &want); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(*got.Lease) != fmt.Sprint(*want.Lease) || !got.Lease.AcquiredAt.Equal(want.Lease.AcquiredAt) {
			t.Fatalf("own %+v, encoding/json %+v", *got.Lease, *want.Lease)
		}
		// And the lease decoder reads it back.
		var back Lease
		if empty, ok := ParseLease(AppendLease(nil, &l), &back); ok && (empty || fmt.Sprint(back) != fmt.Sprint(*want.Lease)) {
			t.Fatalf("ParseLease: %+v, want %+v", back, *want.Lease)
		}
	})
}

// TestParseLeaseUsed: the answers the server writes take the fast path.
func TestParseLeaseUsed(t *testing.T) {
	l := Lease{Name: "jobs/é", ID: "X", Token: 9, Owner: "me", Weight: 1, Limit: 2,
		AcquiredAt: time.Now(), ExpiresAt: time.Now().Add(time.Second), TTLMillis: 1000, WaitedMillis: 0.25}
	var got Lease
	if empty, ok := ParseLease(AppendLease(nil, &l), &got); !ok || empty || got.Token != 9 || got.Name != l.Name {
		t.Fatalf("not decoded fast: %+v %v %v", got, empty, ok)
	}
}

// FuzzParseLease: whenever the fast decoder accepts an answer, it decodes
// it exactly as encoding/json does.
func FuzzParseLease(f *testing.F) {
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
		l := &Lease{Name: "n", ID: "i", Owner: "o"}
		empty, ok := ParseLease(body, l)
		if !ok {
			return
		}
		var plain Lease
		if e, ok := ParseLease(body, &plain); !ok || e != empty || !reflect.DeepEqual(plain, *l) {
			t.Fatalf("%q: hints changed the result: %#v, without %#v", body, *l, plain)
		}
		var env Envelope
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
