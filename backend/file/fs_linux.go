package file

import (
	"encoding/hex"
	"errors"
	"fmt"
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
