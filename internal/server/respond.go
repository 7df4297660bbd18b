package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sema-dev/sema"
)

// Answers over HTTP.

var jsonType = []string{"application/json"}

// codeGone labels requests whose client left before the answer.
const codeGone = "client_gone"

// lengths holds the Content-Length values of common body sizes, shared
// by all responses (net/http only reads header values). Made by the first
// response: at program start it would cost every run of the sema binary.
var lengths = sync.OnceValue(func() [][]string {
	l := make([][]string, 1024)
	for i := range l {
		l[i] = []string{strconv.Itoa(i)}
	}
	return l
})

func contentLength(n int) []string {
	if l := lengths(); n < len(l) {
		return l[n]
	}
	return []string{strconv.Itoa(n)}
}

// dateCache is the Date header of the current second: net/http formats
// one per response otherwise.
type dateCache struct {
	sec int64
	val []string
}

var lastDate atomic.Pointer[dateCache]

func httpDate() []string {
	now := time.Now()
	sec := now.Unix()
	if d := lastDate.Load(); d != nil && d.sec == sec {
		return d.val
	}
	d := &dateCache{sec: sec, val: []string{now.UTC().Format(http.TimeFormat)}}
	lastDate.Store(d)
	return d.val
}

// writeBody writes a complete JSON body. After a long-poll heartbeat the
// status line is already out (committed): only the body is written.
func writeBody(w http.ResponseWriter, status int, body []byte, committed bool) error {
	if !committed {
		h := w.Header()
		h["Content-Type"] = jsonType
		h["Content-Length"] = contentLength(len(body))
		h["Date"] = httpDate()
		w.WriteHeader(status)
	}
	_, err := w.Write(body)
	return err
}

// reply writes a call's answer and counts it; a grant that cannot be
// written is given back.
func (s *Server) reply(w http.ResponseWriter, route string, a answer, g *sema.Grant, committed bool) {
	err := writeBody(w, a.status, a.body, committed)
	if err == nil && g != nil {
		err = http.NewResponseController(w).Flush() // a grant must reach its client, or go back
	}
	s.delivered(route, a, g, err == nil)
}

// fail answers with the error envelope of err.
func (s *Server) fail(w http.ResponseWriter, route string, err error, who caller) {
	bp := getBuf()
	a := s.refused((*bp)[:0], route, err, who)
	s.reply(w, route, a, nil, false)
	putBuf(bp, a.body)
}

// ok answers 200 with v as JSON.
func (s *Server) ok(w http.ResponseWriter, route string, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		s.fail(w, route, err, caller{})
		return
	}
	s.reply(w, route, answer{http.StatusOK, append(body, '\n'), "ok"}, nil, false)
}
