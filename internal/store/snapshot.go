package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sema-dev/sema"
)

const snapMagic = "SEMASNP\x01"

// encodeSnapshot serialises the live state as snapshot n: a meta record
// (token counter or reservation, lease count), one grant record per
// lease, carrying the largest TTL journaled for it (followed by a REVOKE
// record if it was force-released), and a FAST record per name in fast
// mode. Callers hold s.mu.
func (s *Store) encodeSnapshot(n uint64) []byte {
	count := s.holders.Load()
	buf := make([]byte, 0, 64+count*128)
	buf = append(buf, snapMagic...)
	buf = binary.LittleEndian.AppendUint64(buf, n)
	buf = appendFrame(buf, &record{kind: kindMeta, token: max(s.token, s.reserved), count: uint64(count)})
	r := record{kind: kindGrant}
	for _, e := range s.names {
		if e.fast {
			buf = appendFrame(buf, &record{kind: kindFast, name: e.name, limit: e.limit, ttl: e.fastTTL})
		}
		for _, l := range e.holders {
			r.name, r.id, r.owner, r.host, r.principal = e.name, l.id, l.owner, l.host, l.principal
			r.pid, r.weight, r.limit, r.token, r.ttl = int(l.pid), l.weight, e.limit, l.token, l.ttl
			r.acquired = s.wall(l.acquired).UnixNano()
			buf = appendFrame(buf, &r)
			if s.forced(e.name, l.id) {
				buf = appendFrame(buf, &record{kind: kindRevoke, name: e.name, id: l.id})
			}
		}
	}
	return buf
}

// writeSnapshot writes data as snapshot n, atomically and durably.
func writeSnapshot(dir string, n uint64, data []byte) error {
	if err := writeFileSync(dir, snapPath(dir, n), data); err != nil {
		return fmt.Errorf("store: write snapshot: %w: %w", sema.ErrUnavailable, err)
	}
	return nil
}

// readSnapshot decodes snapshot file data numbered n into st. A snapshot
// is written whole before it is renamed into place, so any defect is
// corruption.
func readSnapshot(data []byte, n uint64, st *recovered) error {
	if len(data) < 16 || string(data[:8]) != snapMagic {
		return errors.New("bad header")
	}
	if got := binary.LittleEndian.Uint64(data[8:]); got != n {
		return fmt.Errorf("header says snapshot %d", got)
	}
	data = data[16:]
	meta, k, err := readFrame(data)
	if err != nil || meta.kind != kindMeta {
		return fmt.Errorf("bad meta record: %w", errors.Join(err, errTorn))
	}
	data = data[k:]
	st.token = max(st.token, meta.token)
	var grants uint64
	for len(data) > 0 {
		r, k, err := readFrame(data)
		if err != nil {
			return fmt.Errorf("record after %d leases: %w", grants, err)
		}
		if r.kind != kindGrant && r.kind != kindFast && r.kind != kindRevoke {
			return fmt.Errorf("record after %d leases has kind %d", grants, r.kind)
		}
		if r.kind == kindGrant {
			grants++
		}
		if err := st.apply(&r); err != nil {
			return err
		}
		data = data[k:]
	}
	if grants != meta.count {
		return fmt.Errorf("%d leases, the header says %d", grants, meta.count)
	}
	return nil
}

// maybeSnapshot starts a snapshot in the background once the log has grown
// enough. Callers hold s.mu.
func (s *Store) maybeSnapshot() {
	if s.snapshotting || s.closed {
		return
	}
	if n := s.wal.bytes.Load(); n < s.cfg.SnapshotBytes || n < 2*s.lastSnap {
		return
	}
	s.snapshotting = true
	s.snapDone = make(chan struct{})
	go s.snapshot(s.snapDone)
}

// snapshot rotates the log to a new segment n, writes the state as
// snapshot n and deletes what it supersedes. The state is captured under
// the lock in the same step as the rotation, so snapshot n plus segments
// ≥ n describe everything.
func (s *Store) snapshot(done chan struct{}) {
	defer close(done)
	s.mu.Lock()
	n := s.segNo + 1
	f, err := createSegment(s.cfg.Dir, n)
	if err != nil {
		s.snapshotting = false
		s.lastSnap = max(s.lastSnap, s.wal.bytes.Load()) // back off before retrying
		s.unlock()
		s.log.Error("sema store: cannot start a new log segment", "err", err)
		return
	}
	s.wal.rotate(f)
	s.segNo = n
	data := s.encodeSnapshot(n)
	s.unlock()

	err = writeSnapshot(s.cfg.Dir, n, data)
	if err == nil {
		err = removeBefore(s.cfg.Dir, n)
	}
	s.mu.Lock()
	s.snapshotting = false
	s.lastSnap = int64(len(data))
	s.unlock()
	if err != nil {
		s.log.Error("sema store: snapshot failed; the log keeps growing", "err", err)
		return
	}
	s.log.Debug("sema store: snapshot written", "segment", n, "bytes", len(data))
}
