package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/sema-dev/sema"
)

// errCorrupt marks a data directory that cannot be recovered as it is: a
// file damaged or missing, records that contradict each other. Open's
// errors for it also wrap sema.ErrUnavailable.
var errCorrupt = errors.New("the data directory is damaged")

// recovered is the state rebuilt from a snapshot and the log.
type recovered struct {
	token   uint64
	leases  map[string]*record // name\x00id → its grant record, TTL raised by later TTL records
	revoked map[string]bool    // name\x00id of leases in leases that were force-released
	fast    map[string]*record // name → its FAST record not followed by UNFAST
	dropped int                // bytes of a torn tail dropped
	odd     int                // records honoured with an odd value
	oddWhy  string             // the first of them
}

func (st *recovered) apply(r *record) error {
	if r.odd != "" {
		if st.odd++; st.oddWhy == "" {
			st.oddWhy = fmt.Sprintf("%q: %s", r.name, r.odd)
		}
	}
	k := r.name + "\x00" + r.id
	switch r.kind {
	case kindGrant:
		c := *r
		st.leases[k] = &c
		st.token = max(st.token, r.token)
	case kindEnd:
		delete(st.leases, k)
		delete(st.revoked, k)
	case kindRevoke:
		if st.leases[k] != nil {
			if st.revoked == nil {
				st.revoked = make(map[string]bool)
			}
			st.revoked[k] = true
		}
	case kindTTL:
		if l := st.leases[k]; l != nil && r.ttl > l.ttl {
			l.ttl = r.ttl
		}
	case kindFast:
		c := *r
		if f := st.fast[r.name]; f != nil {
			c.ttl = max(c.ttl, f.ttl)
		}
		st.fast[r.name] = &c
	case kindUnfast:
		delete(st.fast, r.name)
	case kindReserve:
		st.token = max(st.token, r.token)
	default:
		return fmt.Errorf("record of kind %d in the log", r.kind)
	}
	return nil
}

// Open opens (creating if needed) the store in cfg.Dir and recovers its
// state: the newest snapshot, then every later log segment in order. A
// torn record at the very end of the log (a crash in the middle of a
// write, never acknowledged) is dropped; any other defect is an error.
// Every recovered lease is honoured with a fresh full TTL from now, and
// the token counter continues from the largest token ever journaled.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: create data dir: %w: %w", sema.ErrUnavailable, err)
	}
	if fi, err := os.Stat(cfg.Dir); err == nil && fi.Mode().Perm()&0o077 != 0 {
		cfg.Logger.Warn("sema store: data dir is accessible to other users", "dir", cfg.Dir, "mode", fi.Mode().Perm())
	}
	lock, err := lockDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	s, err := open(cfg, lock)
	if err != nil {
		unlockDir(lock)
		return nil, err
	}
	return s, nil
}

func open(cfg Config, lock *os.File) (*Store, error) {
	segs, snaps, err := dirFiles(cfg.Dir)
	if err != nil {
		return nil, err
	}
	st := &recovered{leases: make(map[string]*record), fast: make(map[string]*record)}
	var from, last uint64
	if len(snaps) > 0 {
		from = snaps[len(snaps)-1]
		last = from
		data, err := os.ReadFile(snapPath(cfg.Dir, from))
		if err != nil {
			return nil, fmt.Errorf("store: read snapshot: %w: %w", sema.ErrUnavailable, err)
		}
		if err := readSnapshot(data, from, st); err != nil {
			return nil, fmt.Errorf("store: snapshot %s is corrupt (%v): %w: %w", snapPath(cfg.Dir, from), err, errCorrupt, sema.ErrUnavailable)
		}
	} else if len(segs) > 0 {
		return nil, fmt.Errorf("store: %s has log segments but no snapshot: %w: %w", cfg.Dir, errCorrupt, sema.ErrUnavailable)
	}
	if err := replay(cfg, segs, from, st); err != nil {
		return nil, err
	}
	if len(segs) > 0 {
		last = max(last, segs[len(segs)-1])
	}
	if st.dropped > 0 {
		cfg.Logger.Warn("sema store: dropped the torn end of the log (a crash during a write)", "bytes", st.dropped)
	}
	if st.odd > 0 {
		cfg.Logger.Warn("sema store: honouring records with values that requests may no longer carry",
			"records", st.odd, "first", st.oddWhy)
	}
	if err := checkReserve(cfg, st); err != nil {
		return nil, err
	}

	s := &Store{
		cfg: cfg, log: cfg.Logger, lock: lock, base: time.Now(),
		names: make(map[string]*entry), revoked: make(map[string]int64), principals: make(map[string]string),
		queued: make(map[string]*waiter),
		token:  st.token, reserved: st.token, resDurable: st.token,
		mark: reserveMark{dir: cfg.Dir, top: st.token},
	}
	if err := s.restore(st); err != nil {
		return nil, err
	}
	// Start afresh: a snapshot of what was recovered, a new segment, and
	// nothing older (which also discards any torn tail for good).
	n := last + 1
	data := s.encodeSnapshot(n)
	if err := writeSnapshot(cfg.Dir, n, data); err != nil {
		return nil, err
	}
	f, err := createSegment(cfg.Dir, n)
	if err != nil {
		return nil, err
	}
	if err := removeBefore(cfg.Dir, n); err != nil {
		f.Close()
		return nil, err
	}
	s.segNo, s.lastSnap = n, int64(len(data))
	s.wal = newWAL(f, cfg.Logger, cfg.FlushDelay)
	s.mu.Lock()
	if len(s.heap) > 0 {
		s.armTimer(s.heap[0].expires)
	}
	s.unlock()
	if len(st.leases) > 0 || st.token > 0 {
		cfg.Logger.Info("sema store: recovered", "dir", cfg.Dir, "leases", len(st.leases), "token", st.token)
	}
	return s, nil
}

// replay applies segments numbered ≥ from, which must be consecutive.
func replay(cfg Config, segs []uint64, from uint64, st *recovered) error {
	var todo []uint64
	for _, n := range segs {
		if n >= from {
			todo = append(todo, n)
		}
	}
	sizes := make([]int64, len(todo))
	for i, n := range todo {
		want := from
		if i > 0 {
			want = todo[i-1] + 1
		}
		if n != want && (i > 0 || from > 0) {
			return fmt.Errorf("store: log segment %s is missing: %w: %w", segPath(cfg.Dir, want), errCorrupt, sema.ErrUnavailable)
		}
		fi, err := os.Stat(segPath(cfg.Dir, n))
		if err != nil {
			return fmt.Errorf("store: %w: %w", sema.ErrUnavailable, err)
		}
		sizes[i] = fi.Size()
	}
	// The tail is the last segment with records; later ones were created
	// but never written to (a crash during a rotation).
	tail := len(todo) - 1
	for tail > 0 && sizes[tail] <= int64(len(segHeader(0))) {
		tail--
	}
	for i, n := range todo {
		if i > tail {
			break
		}
		path := segPath(cfg.Dir, n)
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("store: read log: %w: %w", sema.ErrUnavailable, err)
		}
		if err := replaySegment(data, n, i == tail, st); err != nil {
			return fmt.Errorf("store: log segment %s is corrupt (%v): %w: %w", path, err, errCorrupt, sema.ErrUnavailable)
		}
	}
	return nil
}

func replaySegment(data []byte, n uint64, tail bool, st *recovered) error {
	hdr := len(segHeader(0))
	if len(data) < hdr {
		if tail {
			return nil // created, header never fully written
		}
		return errors.New("shorter than its header")
	}
	if string(data[:8]) != segMagic || binary.LittleEndian.Uint64(data[8:]) != n {
		return errors.New("bad header")
	}
	for off := hdr; off < len(data); {
		r, k, err := readFrame(data[off:])
		if err == nil {
			if err := st.apply(&r); err != nil {
				return fmt.Errorf("offset %d: %w", off, err)
			}
			off += k
			continue
		}
		if errors.Is(err, errTorn) && tail && !validFrameIn(data[off+1:]) {
			st.dropped = len(data) - off
			return nil
		}
		return fmt.Errorf("offset %d: %w", off, err)
	}
	return nil
}

// validFrameIn reports whether a valid frame starts anywhere in b: then a
// bad frame before it is corruption, not the torn end of the last write.
func validFrameIn(b []byte) bool {
	for i := range b {
		if _, _, err := readFrame(b[i:]); err == nil {
			return true
		}
	}
	return false
}

// restore rebuilds entries, leases and the expiry heap from st. Every
// lease gets a fresh full TTL from now: its holder may have renewed it
// right before the crash, and renewals are not journaled.
func (s *Store) restore(st *recovered) error {
	now := s.mono()
	baseWall := s.base.UnixNano()
	for k, r := range st.leases {
		e := s.names[r.name]
		if e == nil {
			e = &entry{name: r.name, limit: r.limit}
			s.names[r.name] = e
		}
		if e.limit != r.limit {
			return fmt.Errorf("store: recovered holders of %q disagree on the limit (%d, %d): %w: %w",
				r.name, e.limit, r.limit, errCorrupt, sema.ErrUnavailable)
		}
		l := &lease{
			e: e, id: r.id, owner: r.owner, host: r.host, principal: s.intern(r.principal),
			token: r.token, weight: r.weight, ttl: r.ttl,
			acquired: r.acquired - baseWall, renewed: now, expires: now + int64(r.ttl), pid: pidOf(r),
		}
		e.holders = append(e.holders, l)
		e.used += l.weight
		if e.used > e.limit {
			return fmt.Errorf("store: recovered holders of %q use %d permits of %d: %w: %w",
				r.name, e.used, e.limit, errCorrupt, sema.ErrUnavailable)
		}
		s.heap.push(l)
		s.holders.Add(1)
		if st.revoked[k] {
			s.revoked[k] = l.expires
		}
	}
	for name, f := range st.fast {
		e := s.names[name]
		if e == nil {
			e = &entry{name: name, limit: f.limit}
			s.names[name] = e
		}
		s.fence(e, f.ttl, now)
		s.log.Warn("sema store: a handoff on this name may have been answered before it reached disk; "+
			"granting nothing on it until one TTL has passed", "name", name, "ttl", f.ttl)
	}
	return nil
}
