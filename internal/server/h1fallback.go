package server

import (
	"bytes"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/sema-dev/sema/internal/wire"
)

// fallback serves, on a taken-over connection, a request that parseHead
// left alone: net/http's http.ReadRequest parses it, the hot routes are
// served as usual and the others by ServeHTTP into a buffer. It reports
// whether the connection stays open.
func (c *h1conn) fallback() bool {
	if c.to.read > 0 {
		c.setReadDeadline(deadline(c.to.read))
	}
	req, err := http.ReadRequest(c.br)
	if err != nil {
		c.writeRaw("HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request")
		return false
	}
	if req.ProtoMajor != 1 {
		c.writeRaw("HTTP/1.1 505 HTTP Version Not Supported\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n505 HTTP Version Not Supported")
		return false
	}
	// The checks net/http's server adds to http.ReadRequest's.
	if (req.ProtoAtLeast(1, 1) && req.Host == "") || !validHost(req.Host) || !validHeader(req.Header) {
		c.writeRaw("HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request")
		return false
	}
	if ex := req.Header.Get("Expect"); ex != "" {
		if !strings.EqualFold(ex, "100-continue") || !req.ProtoAtLeast(1, 1) {
			c.writeRaw("HTTP/1.1 417 Expectation Failed\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n417 Expectation Failed")
			return false
		}
		c.writeRaw("HTTP/1.1 100 Continue\r\n\r\n")
	}
	req.RemoteAddr = c.nc.RemoteAddr().String()
	closeAfter := req.Close || c.s.closed.Load()

	if rt := c.s.routes[req.URL.Path]; rt != nil && rt.hot != nil && req.Method == http.MethodPost {
		bp := bodyBufs.Get().(*[]byte)
		defer putBodyBuf(bp)
		b, rerr := readAllInto((*bp)[:0], http.MaxBytesReader(nil, req.Body, wire.MaxBodyBytes))
		*bp = b
		var auth []byte
		if v := req.Header.Get("Authorization"); v != "" {
			auth = []byte(v)
		}
		who, authed := c.s.creds.authenticateBytes(auth)
		ok := c.hot(rt, who, authed, b, rerr, closeAfter || rerr != nil)
		if rerr != nil {
			c.linger()
		}
		return ok && rerr == nil
	}

	fw := &bufferedWriter{h: make(http.Header)}
	c.s.ServeHTTP(fw, req)
	// Drain what the handler left of the body, a bounded amount.
	if n, err := io.CopyN(io.Discard, req.Body, 256<<10); err != io.EOF || n == 256<<10 {
		closeAfter = true
	}
	return c.writeBuffered(fw, req.Method == http.MethodHead, closeAfter) == nil && !closeAfter
}

// validHost accepts what net/http accepts in a Host header.
func validHost(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("!$%&'()*+,-.:;=[]_~", c) >= 0) {
			return false
		}
	}
	return true
}

// validHeader checks header names and values as net/http's server does.
func validHeader(h http.Header) bool {
	for k, vv := range h {
		if !isToken([]byte(k)) {
			return false
		}
		for _, v := range vv {
			for i := 0; i < len(v); i++ {
				if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
					return false
				}
			}
		}
	}
	return true
}

// bufferedWriter is a ResponseWriter that keeps the whole answer.
type bufferedWriter struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (w *bufferedWriter) Header() http.Header { return w.h }

func (w *bufferedWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *bufferedWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

// writeBuffered writes a buffered answer with its Content-Length.
func (c *h1conn) writeBuffered(fw *bufferedWriter, head, closeAfter bool) error {
	if fw.status == 0 {
		fw.status = http.StatusOK
	}
	body := fw.body.Bytes()
	if fw.h.Get("Content-Type") == "" && len(body) > 0 {
		fw.h.Set("Content-Type", http.DetectContentType(body))
	}
	fw.h.Del("Content-Length")
	fw.h.Del("Transfer-Encoding")
	fw.h.Del("Connection")
	var b []byte
	b = appendStatus(b, fw.status)
	keys := make([]string, 0, len(fw.h))
	for k := range fw.h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range fw.h[k] {
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, strings.NewReplacer("\r", " ", "\n", " ").Replace(v)...)
			b = append(b, "\r\n"...)
		}
	}
	b = append(b, "Date: "...)
	b = append(b, httpDate()[0]...)
	b = append(b, "\r\nContent-Length: "...)
	b = append(b, contentLength(len(body))[0]...)
	b = append(b, "\r\n"...)
	if closeAfter {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	if !head {
		b = append(b, body...)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeOut(b, time.Now())
}
