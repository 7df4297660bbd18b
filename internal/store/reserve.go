package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"

	"github.com/sema-dev/sema"
)

// The reservation mark.
//
// Handoffs answered before their record is on disk use tokens covered by a
// RESERVE record (fast.go). If storage loses the end of the log — a disk
// that acknowledged writes it did not keep, a file truncated by hand — the
// log may end below a reservation whose tokens were handed out, and a
// store that simply resumed from the log would hand them out again. So once
// a RESERVE record is on disk, its token is also written to the small file
// RESERVE (atomically: a temporary file, fsync, rename). Open compares:
// a log that ends below the mark has lost data, and the store refuses to
// start unless Config.AcceptDataLoss says to; then tokens continue above
// the mark.
//
// The mark is written after its record is durable, so a crash between the
// two leaves the mark behind the log, never ahead: only a log that lost
// durable records is refused.

const reserveMagic = "SEMARSV\x01"

// reserveMark writes the marks of durable reservations, one at a time,
// never lowering the one on disk.
type reserveMark struct {
	dir string
	wg  sync.WaitGroup // writes in progress (Close waits for them)
	mu  sync.Mutex
	top uint64 // the mark on disk
}

// record writes token as the mark if it is above the one on disk.
func (m *reserveMark) record(token uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if token <= m.top {
		return nil
	}
	b := binary.LittleEndian.AppendUint64([]byte(reserveMagic), token)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli()))
	path := filepath.Join(m.dir, reserveName)
	if err := writeFileSync(m.dir, path, b); err != nil {
		return fmt.Errorf("store: write the reservation mark: %w", err)
	}
	m.top = token
	return nil
}

// readReserve returns the mark in dir, 0 if there is none.
func readReserve(dir string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, reserveName))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: read the reservation mark: %w: %w", sema.ErrUnavailable, err)
	}
	n := len(reserveMagic)
	if len(b) != n+12 || string(b[:n]) != reserveMagic ||
		crc32.Checksum(b[:n+8], castagnoli()) != binary.LittleEndian.Uint32(b[n+8:]) {
		return 0, fmt.Errorf("store: the reservation mark %s is corrupt: %w: %w", filepath.Join(dir, reserveName), errCorrupt, sema.ErrUnavailable)
	}
	return binary.LittleEndian.Uint64(b[n:]), nil
}

// checkReserve refuses a log that ends below the mark, unless
// cfg.AcceptDataLoss; then the token counter continues above the mark.
func checkReserve(cfg Config, st *recovered) error {
	mark, err := readReserve(cfg.Dir)
	if err != nil || mark <= st.token {
		return err
	}
	if !cfg.AcceptDataLoss {
		return fmt.Errorf("store: the log in %s ends below its last token reservation (%d; the log reaches %d): "+
			"storage lost records, maybe grants, and tokens would repeat; "+
			"to start with what is left (tokens continue above the reservation), accept the data loss: %w",
			cfg.Dir, mark, st.token, sema.ErrUnavailable)
	}
	cfg.Logger.Error("sema store: the log ends below its last token reservation: starting with what is left, "+
		"as told to accept the data loss; leases granted in the lost part are unknown", "reservation", mark, "log", st.token)
	st.token = mark
	return nil
}

// writeFileSync writes data to path in dir atomically and durably: to a
// temporary file, fsynced, renamed into place, directory fsynced.
func writeFileSync(dir, path string, data []byte) error {
	tmp := path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err == nil {
		_, err = f.Write(data)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}
