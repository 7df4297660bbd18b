//go:build linux && !race

package rawio

import (
	"syscall"
	"unsafe"
)

func read(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func write(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
