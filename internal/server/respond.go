package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/store"
	"github.com/sema-dev/sema/internal/wire"
)

var jsonType = []string{"application/json"}

// codeGone labels requests whose client left before the answer.
const codeGone = "client_gone"

// lengths holds the Content-Length values of common body sizes, shared
// by all responses (net/http only reads header values).
var lengths = func() [][]string {
	l := make([][]string, 1024)
	for i := range l {
		l[i] = []string{strconv.Itoa(i)}
	}
	return l
}()

func contentLength(n int) []string {
	if n < len(lengths) {
		return lengths[n]
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

func httpDate() []string { return httpDateAt(time.Now()) }

// httpDateAt is httpDate for a clock reading the caller has at hand.
func httpDateAt(now time.Time) []string {
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

// flush pushes the answer out now, reporting whether the connection took it.
func flush(w http.ResponseWriter) error {
	if f, ok := w.(interface{ FlushError() error }); ok {
		return f.FlushError()
	}
	return http.NewResponseController(w).Flush()
}

// fail answers with the error envelope of err.
func (s *Server) fail(w http.ResponseWriter, route string, err error, who caller, committed bool) {
	body := s.errorBody(route, err, who)
	status := body.status
	_ = writeBody(w, status, body.b, committed)
	s.m.request(route, body.code)
}

// failTo answers rep with the error envelope of err. It reports whether
// the answer went out.
func (s *Server) failTo(rep replier, route string, err error, who caller, committed bool) bool {
	body := s.errorBody(route, err, who)
	if rep.send(body.status, body.b, committed) != nil {
		s.m.request(route, codeGone)
		return false
	}
	s.m.request(route, body.code)
	return true
}

type errBody struct {
	b      []byte
	status int
	code   string
}

// errorBody encodes the error envelope of err and logs internal errors.
func (s *Server) errorBody(route string, err error, who caller) errBody {
	e, status := toWire(err, who.Admin)
	if e.Code == wire.CodeInternal {
		s.log.Error("sema serve: internal error", "route", route, "err", err)
	}
	body, merr := json.Marshal(wire.Envelope{Error: e})
	if merr != nil {
		body = []byte(`{"error":{"code":"internal","message":"cannot encode the error"}}`)
	}
	return errBody{append(body, '\n'), status, e.Code}
}

// ok answers 200 with v as JSON.
func (s *Server) ok(w http.ResponseWriter, route string, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		s.fail(w, route, err, caller{}, false)
		return
	}
	_ = writeBody(w, http.StatusOK, append(body, '\n'), false)
	s.m.request(route, "ok")
}

// deliver answers with a lease and reports whether it went out. For an
// acquire, a grant that cannot be delivered (the client is gone, the write
// fails) is given back.
func (s *Server) deliver(rep replier, route string, g sema.Grant, ttl time.Duration, committed bool) bool {
	acquire := route == routeAcquire
	if rep.gone().Err() != nil {
		if acquire {
			s.giveBack(g)
		}
		s.m.request(route, codeGone)
		return false
	}
	l := leaseOf(g, ttl)
	bp := s.bufs.Get().(*[]byte)
	b := appendLeaseEnvelope((*bp)[:0], &l)
	var err error
	if gs, ok := rep.(grantSender); ok && acquire {
		err = gs.sendGrant(http.StatusOK, b, &g)
	} else {
		err = rep.send(http.StatusOK, b, committed)
	}
	if cap(b) <= 4096 {
		*bp = b
		s.bufs.Put(bp)
	}
	if err != nil {
		if acquire {
			s.log.Debug("sema serve: grant not delivered; giving it back", "name", g.Name, "err", err)
			s.giveBack(g)
		}
		s.m.request(route, codeGone)
		return false
	}
	s.m.request(route, "ok")
	if acquire {
		s.m.grants.Inc()
		s.m.wait.Observe(g.Waited.Seconds())
	}
	return true
}

// A grantSender is a replier that may write an answer after send returned
// (sema-mux batches answers): sendGrant is send for an answer carrying g,
// which it gives back itself if that write fails.
type grantSender interface {
	sendGrant(status int, body []byte, g *sema.Grant) error
}

// giveBack releases a grant nobody received, on its own bounded context.
func (s *Server) giveBack(g sema.Grant) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.eng.release(ctx, g.Name, g.ID, store.Caller{Admin: true})
	if err != nil && !errors.Is(err, sema.ErrNotHeld) && !errors.Is(err, sema.ErrClosed) {
		s.log.Warn("sema serve: giving back an undelivered grant failed", "name", g.Name, "err", err)
	}
}
