package file

import (
	"fmt"
	"syscall"

	"github.com/sema-dev/sema"
)

// snapshot is what readState found in a state file.
type snapshot struct {
	st  *state // the decoded record, nil if damaged
	hdr header // its header
	gen uint64 // generation in a well-formed header, even if damaged
}

// firstRead is how much readState reads at first without a cached state:
// the header and, for most names, the whole payload.
const firstRead = 1024

// readState reads and checks the record of a state file. cached (with its
// header) is reused instead of decoding when the file still holds it. name
// is the expected name, or "" to accept the one whose file this is. A
// damaged record gives a snapshot with a nil st; an unknown format version
// is an error. The first read is len(buf) bytes if that holds a header,
// else firstRead: the caller who expects its cached state to hold asks for
// the header only, and one who expects a change for the whole record, so
// that either costs one pread(2).
func readState(f *preader, name string, cached *state, cachedHdr header, buf []byte, in *interner) (snapshot, []byte, error) {
	var snap snapshot
	if len(buf) < headerSize {
		if cap(buf) < firstRead {
			buf = make([]byte, firstRead)
		}
		buf = buf[:firstRead]
	}
	n, err := f.readAt(buf, 0)
	if err != nil {
		return snap, buf, err
	}
	h, kind := parseHeader(buf[:n])
	switch kind {
	case hdrUnsupported:
		return snap, buf, fmt.Errorf("file: %s: %w: state file format version %d, this sema reads %d; "+
			"a newer sema may be using it (remove it only once no process uses it)",
			f.path, sema.ErrUnavailable, int(buf[4])|int(buf[5])<<8, formatVersion)
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
		if n, err = f.readFull(buf, 0); err != nil {
			return snap, buf, err
		}
		if n < want {
			return snap, buf, nil // truncated: damaged
		}
	}
	_, st, err := decodeRecord(buf[:n], in)
	if err != nil || name != "" && st.Name != name || name == "" && !sameFile(f.path, st.Name) {
		return snap, buf, nil
	}
	snap.st, snap.hdr = st, h
	return snap, buf, nil
}

func sameFile(path, name string) bool {
	n := len(path) - len(fileName(name))
	return n >= 0 && path[n:] == fileName(name)
}

// preader reads a state file with pread(2) through its RawConn (which keeps
// the descriptor from being closed under the call). Unlike os.File.ReadAt,
// readAt makes one call: a record shorter than the buffer costs no second
// call to find the end of the file. It is used by one goroutine at a time.
type preader struct {
	rc   syscall.RawConn
	path string
	b    []byte
	off  int64
	n    int
	err  error
	call func(fd uintptr) bool // p.run, bound once: no allocation per call
}

func newPreader(rc syscall.RawConn, path string) *preader {
	p := &preader{rc: rc, path: path}
	p.call = p.run
	return p
}

func (p *preader) run(fd uintptr) bool {
	for {
		// syscall.Pread, as os.File.WriteAt uses syscall.Pwrite: under the
		// race detector the pair orders a write before the reads that see it
		// (the state file carries grants between backends of one process).
		p.n, p.err = syscall.Pread(int(fd), p.b, p.off)
		if p.err != syscall.EINTR {
			return true
		}
	}
}

// readAt returns what one pread(2) of b at off reads.
func (p *preader) readAt(b []byte, off int64) (int, error) {
	p.b, p.off = b, off
	err := p.rc.Read(p.call)
	p.b = nil
	if err == nil {
		err = p.err
	}
	if err != nil {
		return 0, fmt.Errorf("pread: %w", err)
	}
	return max(p.n, 0), nil
}

// readFull reads b at off, or up to the end of the file.
func (p *preader) readFull(b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		m, err := p.readAt(b[n:], off+int64(n))
		if err != nil {
			return n, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n, nil
}
