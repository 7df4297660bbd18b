package server

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

var headSeeds = []string{
	"POST /v1/acquire HTTP/1.1\r\nHost: 127.0.0.1:7543\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n{\"name\":\"jobs\"}",
	"POST /v1/release HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer abcdefghijklmnop\r\nContent-Length: 0\r\n\r\n",
	"POST /v1/renew HTTP/1.1\r\nHost: [::1]:80\r\nConnection: keep-alive, close\r\n\r\n",
	"POST /v1/acquire HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"POST /v1/acquire HTTP/1.1\nHost: x\n\n",
	"POST /v1/acquire HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
	"POST /v1/acquire HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
	"POST /v1/acquire HTTP/1.1\r\nHost: x\r\nContent-Length: +1\r\n\r\nx",
	"POST /v1/acquire HTTP/1.1\r\nHost: x\r\n Folded: y\r\n\r\n",
	"POST /v1/acquire HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n\r\n",
	"POST /v1/acquire?x=1 HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET /v1/acquire HTTP/1.1\r\nHost: x\r\n\r\n",
	"POST /v1/acquire HTTP/1.0\r\nHost: x\r\n\r\n",
	"POST /v1/acquire HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n",
	"POST /v1/acquire HTTP/1.1\r\nHost: x\r\nauthorization:   Bearer  tok \t\r\n\r\n",
}

// FuzzParseHead: whatever parseHead accepts, http.ReadRequest (net/http's
// own parser, plus the checks of its server) reads the same way: method,
// path, body length, Authorization and Connection: close.
func FuzzParseHead(f *testing.F) {
	for _, s := range headSeeds {
		f.Add([]byte(s))
	}
	s := &Server{routes: map[string]*route{}}
	for _, rt := range routeTable() {
		s.routes[rt.path] = rt
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		h, ok := s.parseHead(p)
		end := headEnd(p)
		if ok && end != h.headBytes {
			t.Fatalf("head of %d bytes, parsed %d", end, h.headBytes)
		}
		if !ok {
			return
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(p)))
		if err != nil {
			t.Fatalf("parseHead accepted what net/http refuses (%v): %q", err, p)
		}
		if req.Method != http.MethodPost || req.URL.Path != h.rt.path || req.URL.RawQuery != "" {
			t.Fatalf("request %s %s, parsed %s", req.Method, req.URL, h.rt.path)
		}
		if req.ContentLength != h.length || len(req.TransferEncoding) != 0 {
			t.Fatalf("length %d (%v), parsed %d", req.ContentLength, req.TransferEncoding, h.length)
		}
		if req.Close != h.close {
			t.Fatalf("close %v, parsed %v", req.Close, h.close)
		}
		if got := req.Header.Get("Authorization"); got != string(h.auth) {
			t.Fatalf("authorization %q, parsed %q", got, h.auth)
		}
		if req.Host == "" || !validHost(req.Host) || !validHeader(req.Header) || req.Header.Get("Expect") != "" {
			t.Fatalf("net/http's server would refuse: %q", p)
		}
		// The body that follows is read with the same length.
		body, _ := io.ReadAll(req.Body)
		if rest := p[h.headBytes:]; int64(len(body)) != min(h.length, int64(len(rest))) {
			t.Fatalf("body %d bytes, parsed length %d of %d", len(body), h.length, len(rest))
		}
	})
}

func TestParseHeadSeeds(t *testing.T) {
	s := &Server{routes: map[string]*route{}}
	for _, rt := range routeTable() {
		s.routes[rt.path] = rt
	}
	want := map[int]bool{0: true, 1: true, 2: true, 14: true} // the others go to net/http
	for i, seed := range headSeeds {
		if _, ok := s.parseHead([]byte(seed)); ok != want[i] {
			t.Errorf("seed %d %q: parsed %v", i, strings.SplitN(seed, "\r\n", 2)[0], ok)
		}
	}
}
