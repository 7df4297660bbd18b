package file

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sema-dev/sema"
)

// snapshot is what readState found in a state file.
type snapshot struct {
	st  *state // the decoded record, nil if damaged
	hdr header // its header
	gen uint64 // generation in a well-formed header, even if damaged
}

// firstRead is how much readState reads at once: the header and, for most
// names, the whole payload.
const firstRead = 1024

// readState reads and checks the record of a state file. cached (with its
// header) is reused instead of decoding when the file still holds it. name
// is the expected name, or "" to accept the one whose file this is. A
// damaged record gives a snapshot with a nil st; an unknown format version
// is an error.
func readState(f *os.File, name string, cached *state, cachedHdr header, buf []byte) (snapshot, []byte, error) {
	var snap snapshot
	if cap(buf) < firstRead {
		buf = make([]byte, firstRead)
	}
	buf = buf[:firstRead]
	if cached != nil {
		buf = buf[:headerSize] // enough to tell whether the cache holds
	}
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return snap, buf, err
	}
	h, kind := parseHeader(buf[:n])
	switch kind {
	case hdrUnsupported:
		return snap, buf, fmt.Errorf("file: %s: %w: state file format version %d, this sema reads %d; "+
			"a newer sema may be using it (remove it only once no process uses it)",
			f.Name(), sema.ErrUnavailable, int(buf[4])|int(buf[5])<<8, formatVersion)
	case hdrValid:
		snap.gen = h.gen
	default:
		return snap, buf, nil
	}
	if cached != nil && h == cachedHdr {
		snap.st, snap.hdr = cached, h
		return snap, buf, nil
	}
	if want := headerSize + int(h.length); n < want {
		if cap(buf) < want {
			buf = make([]byte, want)
		}
		buf = buf[:want]
		if n, err = f.ReadAt(buf, 0); n < want {
			return snap, buf, nil // truncated: damaged
		}
	}
	_, st, err := decodeRecord(buf[:n])
	if err != nil || name != "" && st.Name != name || name == "" && !sameFile(f.Name(), st.Name) {
		return snap, buf, nil
	}
	snap.st, snap.hdr = st, h
	return snap, buf, nil
}

func sameFile(path, name string) bool {
	n := len(path) - len(fileName(name))
	return n >= 0 && path[n:] == fileName(name)
}
