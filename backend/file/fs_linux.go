package file

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// checkLocalFS refuses network file systems: their locks are not the
// kernel's local OFD locks and inotify does not see other clients' writes.
func checkLocalFS(dir string) error {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return fmt.Errorf("file: statfs %s: %w", dir, err)
	}
	switch uint32(fs.Type) {
	case unix.NFS_SUPER_MAGIC, unix.SMB_SUPER_MAGIC, unix.SMB2_SUPER_MAGIC, unix.CIFS_SUPER_MAGIC,
		unix.AFS_SUPER_MAGIC, unix.CODA_SUPER_MAGIC, unix.V9FS_MAGIC:
		return fmt.Errorf("file: %s is on a network file system (type %#x): %w; use a local directory or a networked backend",
			dir, fs.Type, errors.ErrUnsupported)
	}
	return nil
}

// bootID returns the kernel's random boot ID, or zeros if unreadable.
func bootID() [16]byte {
	var id [16]byte
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return id
	}
	h, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(string(b)), "-", ""))
	if err == nil && len(h) == len(id) {
		copy(id[:], h)
	}
	return id
}

// openState opens a state file with O_NOATIME when the kernel allows it (we
// own the file, or have CAP_FOWNER): on a disk mount with relatime, reading
// a file written since its last access would update its atime, a journaled
// inode change on ext4 that can wait behind the disk's journal commit. The
// lock path of every step reads the file, so it must not. Without the
// permission (another user's file), the file opens normally.
//
// The file is opened with open(2) and wrapped by os.NewFile: os.OpenFile
// would also try to register it with the runtime's poller, four more
// system calls on every first use of a name, which a regular file always
// refuses.
func openState(path string, flag int) (*os.File, error) {
	fd, err := openFD(path, flag|unix.O_NOATIME)
	if err == unix.EPERM {
		fd, err = openFD(path, flag)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

func openFD(path string, flag int) (int, error) {
	for {
		fd, err := unix.Open(path, flag|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}
