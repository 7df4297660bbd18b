package server

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/wire"
)

func TestBadRequests(t *testing.T) {
	ts := newTS(t, testTokens, nil)
	huge := `{"name":"` + strings.Repeat("a", wire.MaxBodyBytes) + `"}`
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"malformed", "POST", wire.PathAcquire, `{"name":`, 400, wire.CodeBadRequest},
		{"not an object", "POST", wire.PathAcquire, `[1,2]`, 400, wire.CodeBadRequest},
		{"empty body", "POST", wire.PathAcquire, ``, 400, wire.CodeBadRequest},
		{"two objects", "POST", wire.PathAcquire, `{"name":"a"} {"name":"b"}`, 400, wire.CodeBadRequest},
		{"trailing junk", "POST", wire.PathAcquire, `{"name":"a"}x`, 400, wire.CodeBadRequest},
		{"unknown field", "POST", wire.PathAcquire, `{"name":"a","color":"red"}`, 400, wire.CodeBadRequest},
		{"wrong type", "POST", wire.PathAcquire, `{"name":7}`, 400, wire.CodeBadRequest},
		{"huge body", "POST", wire.PathAcquire, huge, 413, wire.CodeTooLarge},
		{"empty name", "POST", wire.PathAcquire, `{"name":""}`, 400, wire.CodeInvalidName},
		{"control char", "POST", wire.PathAcquire, `{"name":"a\u0007b"}`, 400, wire.CodeInvalidName},
		{"invalid utf8", "POST", wire.PathAcquire, "{\"name\":\"a\xffb\"}", 400, wire.CodeInvalidName},
		{"long name", "POST", wire.PathAcquire, `{"name":"` + strings.Repeat("n", 256) + `"}`, 400, wire.CodeInvalidName},
		{"negative limit", "POST", wire.PathAcquire, `{"name":"a","limit":-1}`, 400, wire.CodeInvalidArgument},
		{"huge limit", "POST", wire.PathAcquire, `{"name":"a","limit":9223372036854775807}`, 400, wire.CodeInvalidArgument},
		{"weight over limit", "POST", wire.PathAcquire, `{"name":"a","limit":2,"weight":3}`, 400, wire.CodeInvalidArgument},
		{"negative weight", "POST", wire.PathAcquire, `{"name":"a","weight":-2}`, 400, wire.CodeInvalidArgument},
		{"short ttl", "POST", wire.PathAcquire, `{"name":"a","ttl_ms":50}`, 400, wire.CodeInvalidArgument},
		{"long ttl", "POST", wire.PathAcquire, `{"name":"a","ttl_ms":90000000}`, 400, wire.CodeInvalidArgument},
		{"overflowing ttl", "POST", wire.PathAcquire, `{"name":"a","ttl_ms":9223372036854775807}`, 400, wire.CodeInvalidArgument},
		{"negative ttl", "POST", wire.PathAcquire, `{"name":"a","ttl_ms":-1}`, 400, wire.CodeInvalidArgument},
		{"negative wait", "POST", wire.PathAcquire, `{"name":"a","wait_ms":-1}`, 400, wire.CodeInvalidArgument},
		{"bad id", "POST", wire.PathAcquire, `{"name":"a","id":"no spaces"}`, 400, wire.CodeInvalidArgument},
		{"long owner", "POST", wire.PathAcquire, `{"name":"a","owner":"` + strings.Repeat("o", 256) + `"}`, 400, wire.CodeInvalidArgument},
		{"negative pid", "POST", wire.PathAcquire, `{"name":"a","pid":-5}`, 400, wire.CodeInvalidArgument},
		{"float limit", "POST", wire.PathAcquire, `{"name":"a","limit":1.5}`, 400, wire.CodeBadRequest},
		{"renew unknown", "POST", wire.PathRenew, `{"name":"a","id":"nope"}`, 410, wire.CodeLeaseLost},
		{"renew no id", "POST", wire.PathRenew, `{"name":"a"}`, 400, wire.CodeInvalidArgument},
		{"release unknown", "POST", wire.PathRelease, `{"name":"a","id":"nope"}`, 404, wire.CodeNotHeld},
		{"release bad name", "POST", wire.PathRelease, `{"name":"","id":"x"}`, 400, wire.CodeInvalidName},
		{"release unknown field", "POST", wire.PathRelease, `{"name":"a","id":"x","force":true}`, 400, wire.CodeBadRequest},
		{"force bad id", "POST", wire.PathForceRelease, `{"name":"a","id":"!"}`, 400, wire.CodeInvalidArgument},
		{"describe empty", "GET", wire.PathLock, ``, 400, wire.CodeInvalidName},
		{"list long prefix", "GET", wire.PathLocks + "?prefix=" + strings.Repeat("p", 300), ``, 400, wire.CodeInvalidName},
		{"wrong method", "GET", wire.PathAcquire, ``, 405, wire.CodeMethod},
		{"unknown path", "GET", "/v2/acquire", ``, 404, wire.CodeNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantErr(t, ts.do(c.method, c.path, adminTok, c.body), c.status, c.code)
		})
	}
	// Still serving.
	ts.mustAcquire(aliceTok, wire.AcquireRequest{Name: "still-here"})
	if r := ts.do("GET", wire.PathHealth, "", nil); r.status != 200 {
		t.Fatalf("healthz after bad requests: %d", r.status)
	}
}

func TestDecodeDefaults(t *testing.T) {
	req, wait, err := decodeAcquire([]byte(`{"name":"d","wait_ms":999999999}`), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if req.Limit != 1 || req.Weight != 1 || req.TTL != 15*time.Second || len(req.ID) == 0 || wait != time.Minute {
		t.Errorf("defaults: %+v wait %v", req, wait)
	}
}

func FuzzDecodeAcquire(f *testing.F) {
	for _, s := range []string{
		`{"name":"a"}`, `{"name":"a","limit":3,"weight":2,"ttl_ms":1000,"owner":"o","id":"abc","wait_ms":5,"host":"h","pid":1}`,
		`{"name":"\u00e9t\u00e9","limit":0}`, `{}`, `null`, `{"name":"a","x":1}`, `{"name":"a"}{}`, `{"ttl_ms":1e3}`,
		"{\"name\":\"\xff\"}", `{"name":"a","limit":1073741825}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, wait, err := decodeAcquire(b, time.Minute)
		if err != nil {
			if !errors.Is(err, sema.ErrInvalidArgument) && !errors.Is(err, sema.ErrInvalidName) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		if err := req.Validate(); err != nil {
			t.Fatalf("accepted an invalid request %+v: %v", req, err)
		}
		if wait < 0 || wait > time.Minute {
			t.Fatalf("wait %v outside [0, cap]", wait)
		}
	})
}

func FuzzDecodeRenewRelease(f *testing.F) {
	for _, s := range []string{`{"name":"a","id":"b"}`, `{"name":"a","id":"b","ttl_ms":100}`, `{"name":"a","id":""}`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if in, ttl, err := decodeRenew(b); err == nil {
			if sema.ValidateTTL(ttl) != nil || checkLease(in.Name, in.ID) != nil {
				t.Fatalf("renew accepted %+v ttl %v", in, ttl)
			}
		}
		if in, err := decodeRelease(b); err == nil && checkLease(in.Name, in.ID) != nil {
			t.Fatalf("release accepted %+v", in)
		}
		if in, err := decodeForceRelease(b); err == nil && sema.ValidateName(in.Name) != nil {
			t.Fatalf("force-release accepted %+v", in)
		}
	})
}

func FuzzParseTokens(f *testing.F) {
	f.Add("client abcdefghijklmnop\n# comment\n\nadmin 0123456789abcdef0\n")
	f.Add("root x")
	f.Add("client short")
	f.Fuzz(func(t *testing.T, s string) {
		toks, err := ParseTokens(strings.NewReader(s))
		if err != nil {
			if strings.Contains(err.Error(), "abcdefghijklmnop") {
				t.Fatalf("error leaks a token: %v", err)
			}
			return
		}
		for _, tk := range toks {
			if tk.validate() != nil {
				t.Fatalf("accepted %+v", tk)
			}
		}
	})
}
