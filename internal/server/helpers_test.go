package server

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/store"
	"github.com/sema-dev/sema/internal/wire"
)

var quiet = slog.New(slog.DiscardHandler)

const (
	adminTok  = "admin-token-0123456789"
	aliceTok  = "alice-token-0123456789"
	bobTok    = "bob-token-012345678901"
	unknownTk = "nobody-token-012345678"
)

var testTokens = []Token{{RoleAdmin, adminTok}, {RoleClient, aliceTok}, {RoleClient, bobTok}}

type tserver struct {
	t   testing.TB
	url string
	srv *Server
	st  *store.Store
	hs  *httptest.Server
}

// newTS starts the server over a fresh store (or over b if given).
func newTS(t testing.TB, tokens []Token, b sema.Backend, tweak ...func(*Config)) *tserver {
	t.Helper()
	return startTS(t, tokens, b, nil, tweak...)
}

// startTS is newTS with hsTweak applied to the http.Server before it
// starts (timeouts, protocols).
func startTS(t testing.TB, tokens []Token, b sema.Backend, hsTweak func(*http.Server), tweak ...func(*Config)) *tserver {
	t.Helper()
	var st *store.Store
	if b == nil {
		var err error
		st, err = store.Open(store.Config{Dir: t.TempDir(), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		b = st
	}
	cfg := Config{Backend: b, Tokens: tokens, Logger: quiet}
	for _, f := range tweak {
		f(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv)
	hs.Config.RegisterOnShutdown(srv.Close)
	if hsTweak != nil {
		hsTweak(hs.Config)
	}
	hs.Start()
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
		b.Close()
	})
	return &tserver{t: t, url: hs.URL, srv: srv, st: st, hs: hs}
}

type reply struct {
	status int
	raw    string
	env    wire.Envelope
}

// do sends a request; body may be a string (sent verbatim) or a value to
// encode as JSON.
func (ts *tserver) do(method, path, token string, body any) reply {
	ts.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, ts.url+path, rd)
	if err != nil {
		ts.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.env)
	return r
}

func (ts *tserver) acquire(token string, in wire.AcquireRequest) reply {
	ts.t.Helper()
	return ts.do("POST", wire.PathAcquire, token, in)
}

func (ts *tserver) mustAcquire(token string, in wire.AcquireRequest) *wire.Lease {
	ts.t.Helper()
	r := ts.acquire(token, in)
	if r.status != 200 || r.env.Lease == nil {
		ts.t.Fatalf("acquire %+v: %d %s", in, r.status, r.raw)
	}
	return r.env.Lease
}

func (ts *tserver) describe(token, name string) sema.Status {
	ts.t.Helper()
	r := ts.do("GET", wire.PathLock+pathEscape(name), token, nil)
	var st sema.Status
	if r.status != 200 || json.Unmarshal([]byte(r.raw), &st) != nil {
		ts.t.Fatalf("describe %q: %d %s", name, r.status, r.raw)
	}
	return st
}

func pathEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(s, "%", "%25"), "/", "%2F"), " ", "%20")
}

// wantErr checks an error reply's status and code.
func wantErr(t *testing.T, r reply, status int, code string) {
	t.Helper()
	if r.status != status || r.env.Error == nil || r.env.Error.Code != code {
		t.Errorf("got %d %s; want %d %s", r.status, r.raw, status, code)
	}
}
