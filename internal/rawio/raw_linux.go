//go:build linux && !race

package rawio

import (
	"syscall"
	"unsafe"
)

func read(fd int, p []byte) (int, error)  { return rawRW(syscall.SYS_READ, fd, p) }
func write(fd int, p []byte) (int, error) { return rawRW(syscall.SYS_WRITE, fd, p) }

// rawRW is read(2) or write(2) (trap) of p, as a raw system call.
func rawRW(trap uintptr, fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, e := syscall.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
