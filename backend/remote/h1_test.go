package remote

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestReadResponse(t *testing.T) {
	for _, tc := range []struct {
		in     string
		status int
		body   string
		keep   bool
	}{
		{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", 200, "{}", true},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n \r\n1\r\n \r\n2;x=y\r\n{}\r\n0\r\nTrailer: v\r\n\r\n", 200, "  {}", true},
		{"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 409 Conflict\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc", 409, "abc", false},
		{"HTTP/1.0 200 OK\r\n\r\nuntil eof", 200, "until eof", false},
		{"HTTP/1.1 204 No Content\r\n\r\n", 204, "", true},
		{"HTTP/1.1 200\nContent-Length: 1\n\nx", 200, "x", true},
	} {
		st, body, keep, err := readResponse(bufio.NewReader(strings.NewReader(tc.in)), nil)
		if err != nil || st != tc.status || string(body) != tc.body || keep != tc.keep {
			t.Errorf("%q: status %d body %q keep %v err %v", tc.in, st, body, keep, err)
		}
	}
	for _, bad := range []string{
		"", "HTTP/1.1 200 OK\r\n", "HTTP/2 200 OK\r\n\r\n", "HTTP/1.1 2x0 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
	} {
		if _, _, _, err := readResponse(bufio.NewReader(strings.NewReader(bad)), nil); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzReadResponse: the HTTP/1.1 answer parser never panics, and whatever
// it accepts, net/http reads the same way (status and body).
func FuzzReadResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n \r\n2\r\n{}\r\n0\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 410 Gone\r\nContent-Length: 0\r\n\r\n"))
	f.Add([]byte("HTTP/1.0 503 x\r\nConnection: close\r\n\r\nbody"))
	f.Fuzz(func(t *testing.T, in []byte) {
		st, body, _, err := readResponse(bufio.NewReaderSize(bytes.NewReader(in), 4096), nil)
		if err != nil || st < 200 || st > 999 {
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(in)), &http.Request{Method: "POST"})
		if err != nil || resp.StatusCode < 200 {
			return // stricter in places (header names), and it returns 1xx answers itself
		}
		ref, rerr := io.ReadAll(resp.Body)
		if rerr != nil {
			return
		}
		if resp.StatusCode != st || !bytes.Equal(ref, body) {
			t.Fatalf("%q: got %d %q, net/http %d %q", in, st, body, resp.StatusCode, ref)
		}
	})
}
