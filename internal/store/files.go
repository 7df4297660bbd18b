package store

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sema-dev/sema"
)

// Files in the data directory:
//
//	LOCK                    held (flock) by the process using the directory
//	RESERVE                 the last token reservation known to be in the log
//	wal-<16 hex>.log        log segment n: a header, then framed records
//	snap-<16 hex>.snap      snapshot n: the state before segment n
//	*.tmp                   a snapshot being written (deleted at open)
const (
	lockName    = "LOCK"
	reserveName = "RESERVE"
	segPrefix   = "wal-"
	segSuffix   = ".log"
	snapPrefix  = "snap-"
	snapSuffix  = ".snap"
	tmpSuffix   = ".tmp"
)

func segPath(dir string, n uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%s%016x%s", segPrefix, n, segSuffix))
}

func snapPath(dir string, n uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%s%016x%s", snapPrefix, n, snapSuffix))
}

// dirFiles lists the segment and snapshot numbers in dir, sorted, and
// removes leftover temporary files.
func dirFiles(dir string) (segs, snaps []uint64, err error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("store: read data dir: %w: %w", sema.ErrUnavailable, err)
	}
	for _, de := range des {
		name := de.Name()
		switch {
		case strings.HasSuffix(name, tmpSuffix):
			_ = os.Remove(filepath.Join(dir, name))
		case strings.HasPrefix(name, segPrefix) && strings.HasSuffix(name, segSuffix):
			if n, ok := parseNum(name, segPrefix, segSuffix); ok {
				segs = append(segs, n)
			}
		case strings.HasPrefix(name, snapPrefix) && strings.HasSuffix(name, snapSuffix):
			if n, ok := parseNum(name, snapPrefix, snapSuffix); ok {
				snaps = append(snaps, n)
			}
		}
	}
	slices.Sort(segs)
	slices.Sort(snaps)
	return segs, snaps, nil
}

func parseNum(name, prefix, suffix string) (uint64, bool) {
	s := strings.TrimSuffix(strings.TrimPrefix(name, prefix), suffix)
	if len(s) != 16 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 16, 64)
	return n, err == nil
}

// removeBefore deletes segments and snapshots numbered below n.
func removeBefore(dir string, n uint64) error {
	segs, snaps, err := dirFiles(dir)
	if err != nil {
		return err
	}
	for _, s := range segs {
		if s < n {
			if err := os.Remove(segPath(dir, s)); err != nil {
				return fmt.Errorf("store: remove old segment: %w", err)
			}
		}
	}
	for _, s := range snaps {
		if s < n {
			if err := os.Remove(snapPath(dir, s)); err != nil {
				return fmt.Errorf("store: remove old snapshot: %w", err)
			}
		}
	}
	return nil
}

// syncDir makes the directory entries of dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
