//go:build !linux || race

package rawio

import "syscall"

func read(fd int, p []byte) (int, error) {
	n, err := syscall.Read(fd, p)
	if n < 0 {
		n = 0
	}
	return n, err
}

func write(fd int, p []byte) (int, error) {
	n, err := syscall.Write(fd, p)
	if n < 0 {
		n = 0
	}
	return n, err
}
