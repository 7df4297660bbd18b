package server

import (
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/rearm"
	"github.com/sema-dev/sema/internal/wire"
)

// The way out of a sema-mux connection.
//
// Answers come from any goroutine: the connection's own (renewals,
// releases, and the grants its releases hand over), the log's committer,
// another connection's release, a timer. None of them waits for the
// socket: an answer is appended to out, and one writer at a time writes
// it — the connection's goroutine at the end of the frames of one read,
// else a goroutine started for it. So a release on one connection never
// waits for another connection's client to read, and a client that reads
// slowly costs its own connection only: its writer waits up to the write
// timeout, then the connection closes and the grants it could not take
// are given back. The connection's goroutine stops reading calls while
// more than muxMaxOut of answers wait.

// muxMaxOut bounds the answers waiting for the socket before the
// connection's goroutine stops reading calls.
const muxMaxOut = 1 << 20

// send appends the answer to tag; g, if not nil, is the grant it carries,
// given back if it is never written. It reports false if the connection
// is broken (the caller gives g back).
func (m *muxConn) send(tag uint32, a answer, g *sema.Grant) bool {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	if m.werr != nil {
		return false
	}
	m.out = wire.AppendMuxAnswer(m.out, tag, a.status, a.body)
	if g != nil {
		m.grants = append(m.grants, *g)
	}
	if !m.batch && !m.writing {
		m.writing = true
		go m.flush()
	}
	return true
}

// startBatch holds the answers back while the connection's goroutine
// serves the frames of one read.
func (m *muxConn) startBatch() {
	m.wmu.Lock()
	m.batch = true
	m.wmu.Unlock()
}

// endBatch writes the answers of the batch (with any others meanwhile),
// unless a writer is at work already; then it waits while too many are
// waiting.
func (m *muxConn) endBatch() {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	m.batch = false
	if !m.writing {
		m.writeLocked()
	}
	for m.writing && len(m.out) > muxMaxOut && m.werr == nil {
		m.wrote.Wait()
	}
}

// flush is the writer started by send.
func (m *muxConn) flush() {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	m.writeLocked()
}

// drain writes what is left, waiting for a writer at work. Once it
// returns no answer is written any more.
func (m *muxConn) drain() {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	for m.writing {
		m.wrote.Wait()
	}
	m.writeLocked()
	if m.werr == nil {
		m.werr = errClosedConn
	}
}

// writeLocked writes out until it is empty, as the one writer. Callers
// hold m.wmu; it is let go during each write.
func (m *muxConn) writeLocked() {
	m.writing = true
	for len(m.out) > 0 && m.werr == nil {
		b, gs := m.out, m.grants
		m.out, m.grants = m.spare[:0], m.spareGrants[:0]
		if t, ok := rearm.Deadline(m.wdl, m.to.write, time.Now()); ok {
			m.wdl = t
			_ = m.nc.SetWriteDeadline(t)
		}
		m.wmu.Unlock()
		_, err := m.nc.Write(b)
		m.wmu.Lock()
		if err != nil {
			m.failWrite(err, gs)
		} else {
			m.spare, m.spareGrants = b[:0], gs[:0]
		}
		m.wrote.Broadcast()
	}
	m.writing = false
	m.wrote.Broadcast()
}

// failWrite breaks the connection after a failed write and gives back the
// grants not written: those of the failed write (gs) and those waiting.
// Callers hold m.wmu.
func (m *muxConn) failWrite(err error, gs []sema.Grant) {
	m.werr = err
	_ = m.nc.Close() // the read loop ends too
	lost := append(gs, m.grants...)
	m.out, m.grants = nil, nil
	if len(lost) > 0 {
		go func() {
			for _, g := range lost {
				m.s.giveBack(g)
			}
		}()
	}
}

// armWrite sets the write deadline of the upgrade's answer.
func (m *muxConn) armWrite() {
	if m.to.write > 0 {
		m.wdl = time.Now().Add(m.to.write)
		_ = m.nc.SetWriteDeadline(m.wdl)
	}
}
