package server

import (
	"encoding/json"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/wire"
)

// heardForced tells the holder of a force-released lease at once, by a
// notice frame on each sema-mux connection of its caller (see
// wire.Notice): the Go client then ends the lease without waiting for its
// next renewal. The ledger says whose lease it is; a holder that reaches
// the server by plain HTTP, or not at all now, learns at its next renewal.
// The backend calls it (see sema.ForceNotifier) for force-releases made
// through this server or any other way.
func (s *Server) heardForced(n sema.ForceNotice) {
	if s.closed.Load() {
		return
	}
	s.connMu.Lock()
	conns := make([]*muxConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.connMu.Unlock()
	var body []byte
	holds := make(map[string]bool) // by principal
	for _, c := range conns {
		p := c.who.Principal
		h, seen := holds[p]
		if !seen {
			known, released := s.leases.lookup(p, n.Name, n.ID)
			h = known && !released
			holds[p] = h
		}
		if !h {
			continue
		}
		if body == nil {
			body, _ = json.Marshal(wire.Notice{Forced: &wire.ForcedLease{Name: n.Name, ID: n.ID, By: n.By}})
			body = append(body, '\n')
		}
		c.send(wire.MuxNoticeTag, answer{status: wire.MuxStatusNotice, body: body}, nil)
	}
}
