package file

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"

	"github.com/sema-dev/sema"
	"golang.org/x/sys/unix"
)

// A directory is host-wide when it has the setgid bit: its state files are
// created with mode 0660 and, by the setgid bit, in the directory's group,
// so that the processes of every user of that group share its names. A
// directory without it is private to its owner (state files 0600).
//
// An administrator makes one with
//
//	install -d -m 2770 -g sema /var/lib/sema
//
// and every user who needs its locks joins the group.

// access is who may use a backend's directory.
type access struct {
	uid    uint32 // this process's real user ID
	shared bool   // the directory is host-wide
	gid    uint32 // the directory's group
}

func dirAccess(fi fs.FileInfo) access {
	a := access{uid: uint32(os.Getuid()), shared: fi.Mode()&fs.ModeSetgid != 0}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		a.gid = st.Gid
	}
	return a
}

// fileMode is the mode of new state files.
func (a access) fileMode() fs.FileMode {
	if a.shared {
		return 0o660
	}
	return 0o600
}

// mayRing reports whether the sender of a ring may hand grants to this
// process: the same user, root, or in a host-wide directory a process
// with the directory's group among its groups (one that can write the
// state files anyway). Rings of anyone else are dropped unread, so no
// other user can keep a waiter busy.
func (a access) mayRing(cred *unix.Ucred) bool {
	if cred.Uid == a.uid || cred.Uid == 0 {
		return true
	}
	return a.shared && cred.Pid > 0 && inGroup(cred.Pid, a.gid)
}

// inGroup reports whether process pid (as this process's PID namespace
// numbers it) has gid as its real, effective or a supplementary group, as
// /proc/PID/status lists them.
func inGroup(pid int32, gid uint32) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/status")
	if err != nil {
		return false
	}
	want := strconv.FormatUint(uint64(gid), 10)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok || string(k) != "Gid" && string(k) != "Groups" {
			continue
		}
		for _, g := range bytes.Fields(v) {
			if string(g) == want {
				return true
			}
		}
	}
	return false
}

// accessErr turns a failure to open or create name's state file into an
// error naming the lock and the directory (not the file, whose name is a
// hash), with what to check when permission is denied.
func (b *Backend) accessErr(op, name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	if !errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("file: %s state of %q in %s: %w: %w", op, name, b.dir, sema.ErrUnavailable, err)
	}
	hint := "the directory is private to its owner; for locks shared by several users, use a host-wide directory " +
		"(setgid and group-writable, as made by install -d -m 2770 -g GROUP DIR) whose group they belong to"
	if b.acc.shared {
		hint = fmt.Sprintf("the directory is host-wide: this user must belong to its group (gid %d), "+
			"and the directory be group-writable", b.acc.gid)
		if fi, serr := os.Stat(statePath(b.dir, name)); serr == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && (st.Gid != b.acc.gid || fi.Mode().Perm()&0o060 != 0o060) {
				hint = fmt.Sprintf("the lock's state file has group %d and mode %#o, not the directory's group %d and 0660 "+
					"(made before the directory was host-wide?): fix it with chgrp and chmod, or remove it while unused",
					st.Gid, fi.Mode().Perm(), b.acc.gid)
			}
		}
	}
	return fmt.Errorf("file: %s lock %q in %s: %w: %w: %s", op, name, b.dir, sema.ErrUnavailable, err, hint)
}
