package server

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sema-dev/sema/internal/wire"
)

// strictDecode is decodeJSON over a byte slice.
func strictDecode(b []byte, v any) error { return decodeJSON(bytes.NewReader(b), v) }

// FuzzFastDecode checks that the fast decoders accept only bodies that
// encoding/json (strict) accepts, with the same result.
func FuzzFastDecode(f *testing.F) {
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
		var fa, sa wire.AcquireRequest
		if fastAcquire(b, &fa) {
			if err := strictDecode(b, &sa); err != nil || fa != sa {
				t.Fatalf("acquire %q: fast %+v, strict %+v (%v)", b, fa, sa, err)
			}
		}
		var fr, sr wire.RenewRequest
		if fastRenew(b, &fr) {
			if err := strictDecode(b, &sr); err != nil || fr != sr {
				t.Fatalf("renew %q: fast %+v, strict %+v (%v)", b, fr, sr, err)
			}
		}
		var fl, sl wire.ReleaseRequest
		if fastRelease(b, &fl) {
			if err := strictDecode(b, &sl); err != nil || fl != sl {
				t.Fatalf("release %q: fast %+v, strict %+v (%v)", b, fl, sl, err)
			}
		}
		// readBody gives the strict result whichever path it takes.
		var ra, ta wire.AcquireRequest
		rerr := readBody(bytes.NewReader(b), &ra, func(p []byte) bool { return fastAcquire(p, &ra) })
		serr := strictDecode(b, &ta)
		if (rerr == nil) != (serr == nil) || ra != ta {
			t.Fatalf("readBody %q: %+v %v, strict %+v %v", b, ra, rerr, ta, serr)
		}
	})
}

// TestFastDecodeUsed checks that the plain bodies clients send take the
// fast path (else this file's speed-up is silently gone).
func TestFastDecodeUsed(t *testing.T) {
	var a wire.AcquireRequest
	if !fastAcquire([]byte(`{"name":"n","limit":1,"weight":1,"ttl_ms":15000,"id":"X","wait_ms":5}`), &a) || a.WaitMillis != 5 {
		t.Fatalf("acquire not fast: %+v", a)
	}
	var r wire.ReleaseRequest
	if !fastRelease([]byte(`{"name":"n","id":"X"}`+"\n"), &r) || r.ID != "X" {
		t.Fatalf("release not fast: %+v", r)
	}
	for _, s := range []string{`{"name":"n","x":1}`, `{"Name":"n"}`, `{"name":"n","name":"m"}`} {
		if fastRelease([]byte(s), &r) {
			t.Fatalf("fast path accepted %s", s)
		}
	}
}

// TestReadBodyLimit: a body over the limit is errTooLarge, as when
// streaming.
func TestReadBodyLimit(t *testing.T) {
	big := `{"name":"` + strings.Repeat("a", 2*wire.MaxBodyBytes) + `"}`
	var in wire.ReleaseRequest
	body := io.LimitReader(strings.NewReader(big), int64(len(big)))
	err := readBody(&errAfter{r: body, n: wire.MaxBodyBytes}, &in, func(p []byte) bool { return fastRelease(p, &in) })
	if err == nil {
		t.Fatal("no error for a truncated body")
	}
}

// errAfter fails after n bytes, like a broken connection.
type errAfter struct {
	r io.Reader
	n int
}

func (e *errAfter) Read(p []byte) (int, error) {
	if e.n <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	if len(p) > e.n {
		p = p[:e.n]
	}
	n, err := e.r.Read(p)
	e.n -= n
	return n, err
}

// TestResponseHeaders: the cached Date and Content-Length headers are
// well-formed on the hot answers.
func TestResponseHeaders(t *testing.T) {
	ts := newTS(t, nil, nil)
	for _, body := range []string{`{"name":"hdr","ttl_ms":30000,"wait_ms":1000}`, `{"name":"hdr2"}`} {
		resp, err := http.Post(ts.url+wire.PathAcquire, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(raw)) {
			t.Fatalf("status %d, Content-Length %d for %d bytes: %s", resp.StatusCode, resp.ContentLength, len(raw), raw)
		}
		if _, err := http.ParseTime(resp.Header.Get("Date")); err != nil {
			t.Fatalf("Date %q: %v", resp.Header.Get("Date"), err)
		}
	}
}
