package faults

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Resource is the fenced resource the workers write to while they hold a
// lease: one file per name in a directory, shared by every process. For a
// mutex it behaves as a fencing-aware storage would: it refuses a write
// whose token is lower than the highest it has accepted. For a semaphore
// (limit > 1) it accepts every write and only logs it. Each attempt is
// decided and logged under flock(2), so the file holds the order in which
// the resource saw them, with their times and verdicts, whatever happens
// to the writer.
type Resource struct {
	dir   string
	mu    sync.Mutex
	files map[string]*os.File
}

// resHeader is the size of a resource file's header: the highest accepted
// token, little-endian.
const resHeader = 8

// OpenResource returns the resource kept in dir.
func OpenResource(dir string) *Resource {
	return &Resource{dir: dir, files: map[string]*os.File{}}
}

func (r *Resource) file(name string) (*os.File, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f := r.files[name]; f != nil {
		return f, nil
	}
	f, err := os.OpenFile(filepath.Join(r.dir, hex.EncodeToString([]byte(name))+".res"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	r.files[name] = f
	return f, nil
}

// Write is one attempt to write to the resource of name with a lease's
// token. It returns whether the resource accepted it and when it decided.
func (r *Resource) Write(name string, limit int64, token uint64, id string) (ok bool, at int64, err error) {
	f, err := r.file(name)
	if err != nil {
		return false, 0, err
	}
	fd := int(f.Fd())
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		return false, 0, err
	}
	defer unix.Flock(fd, unix.LOCK_UN)
	var hdr [resHeader]byte
	n, err := unix.Pread(fd, hdr[:], 0)
	if err != nil {
		return false, 0, err
	}
	var highest uint64
	if n == resHeader {
		highest = binary.LittleEndian.Uint64(hdr[:])
	}
	var fst unix.Stat_t
	if err := unix.Fstat(fd, &fst); err != nil {
		return false, 0, err
	}
	end := max(fst.Size, resHeader) // (pwrite, not O_APPEND: Linux's pwrite ignores the offset with O_APPEND)
	at = Now()
	ok = limit > 1 || token >= highest
	line := fmt.Sprintf("%d %d %s %t\n", at, token, id, ok)
	if _, err := unix.Pwrite(fd, []byte(line), end); err != nil {
		return false, 0, err
	}
	if n < resHeader || ok && token > highest {
		if ok {
			highest = max(highest, token)
		}
		binary.LittleEndian.PutUint64(hdr[:], highest)
		if _, err := unix.Pwrite(fd, hdr[:], 0); err != nil {
			return false, 0, err
		}
	}
	return ok, at, nil
}

// Close closes the files.
func (r *Resource) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.files {
		f.Close()
	}
	r.files = map[string]*os.File{}
}

// ResWrite is one attempt as the resource logged it.
type ResWrite struct {
	T     int64
	Token uint64
	ID    string
	OK    bool
}

// ReadResource returns every name's log, in the resource's order.
func ReadResource(dir string) (map[string][]ResWrite, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.res"))
	if err != nil {
		return nil, err
	}
	out := map[string][]ResWrite{}
	for _, p := range paths {
		raw, err := hex.DecodeString(strings.TrimSuffix(filepath.Base(p), ".res"))
		if err != nil {
			return nil, fmt.Errorf("resource file %s: %v", p, err)
		}
		ws, err := readResourceFile(p)
		if err != nil {
			return nil, err
		}
		out[string(raw)] = ws
	}
	return out, nil
}

func readResourceFile(path string) ([]ResWrite, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rd := bufio.NewReader(f)
	if _, err := rd.Discard(resHeader); err != nil {
		return nil, nil // created, never written
	}
	var out []ResWrite
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			if line != "" {
				return nil, fmt.Errorf("%s: a line cut short: %q", path, line)
			}
			return out, nil
		}
		var w ResWrite
		if _, err := fmt.Sscanf(line, "%d %d %s %t\n", &w.T, &w.Token, &w.ID, &w.OK); err != nil {
			return nil, fmt.Errorf("%s: %q: %v", path, line, err)
		}
		out = append(out, w)
	}
}
