package rawio_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/sema-dev/sema/internal/rawio"
)

// pair returns both ends of a loopback TCP connection, the first also as
// a rawio.Conn.
func pair(t *testing.T) (*rawio.Conn, net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer := <-acc
	if peer == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { nc.Close(); peer.Close() })
	rc, ok := rawio.New(nc)
	if !ok {
		t.Fatal("New: a TCP connection has a raw connection")
	}
	return rc, nc, peer
}

// TestLargeWriteWaitsForRoom writes more than the socket buffers hold to
// a peer that reads slowly: the writes meet EAGAIN and must wait and
// resume, and every byte arrives in order.
func TestLargeWriteWaitsForRoom(t *testing.T) {
	rc, _, peer := pair(t)
	data := make([]byte, 16<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	got := make(chan []byte, 1)
	go func() {
		time.Sleep(50 * time.Millisecond) // let the buffers fill
		b, _ := io.ReadAll(peer)
		got <- b
	}()
	n, err := rc.Write(data)
	if err != nil || n != len(data) {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(data))
	}
	if err := rc.RawConn().Control(func(fd uintptr) { _ = syscall.Shutdown(int(fd), syscall.SHUT_WR) }); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, data) {
		t.Fatalf("the peer read %d bytes, not the %d written (or not in order)", len(b), len(data))
	}
}

func TestReadWaitsThenReads(t *testing.T) {
	rc, _, peer := pair(t)
	go func() {
		time.Sleep(20 * time.Millisecond)
		_, _ = peer.Write([]byte("hello"))
	}()
	p := make([]byte, 64)
	n, err := rc.Read(p)
	if err != nil || string(p[:n]) != "hello" {
		t.Fatalf("Read = %q, %v", p[:n], err)
	}
	if n, err := rc.Read(nil); n != 0 || err != nil {
		t.Fatalf("Read(nil) = %d, %v; want 0, nil", n, err)
	}
	peer.Close()
	if n, err := rc.Read(p); n != 0 || err != io.EOF {
		t.Fatalf("Read after the peer closed = %d, %v; want 0, io.EOF", n, err)
	}
}

// TestErrorsAreNetConns: callers tell a timeout from a reset by the
// errors net.Conn returns; rawio's must be the same kinds.
func TestErrorsAreNetConns(t *testing.T) {
	rc, nc, peer := pair(t)
	// Past the read deadline: a timeout, as net.Conn's.
	_ = nc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := rc.Read(make([]byte, 8))
	var op *net.OpError
	if !errors.As(err, &op) || !op.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) || op.Op != "read" {
		t.Fatalf("Read past the deadline = %v; want a read *net.OpError that is a timeout", err)
	}
	if _, nested := op.Err.(*net.OpError); nested {
		t.Fatalf("%v: an OpError inside an OpError", err)
	}
	_ = nc.SetReadDeadline(time.Time{})

	// A reset: an OpError that is not a timeout.
	_ = peer.(*net.TCPConn).SetLinger(0)
	peer.Close()
	time.Sleep(20 * time.Millisecond)
	_, err = rc.Read(make([]byte, 8))
	if !errors.As(err, &op) || op.Timeout() || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Read after a reset = %v; want a *net.OpError of ECONNRESET", err)
	}
	_, err = rc.Write([]byte("x"))
	if !errors.As(err, &op) || op.Timeout() || op.Op != "write" {
		t.Fatalf("Write after a reset = %v; want a write *net.OpError", err)
	}
	nc.Close()
	if _, err := rc.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close = %v; want net.ErrClosed", err)
	}
}

func TestNewWithoutRawConn(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, ok := rawio.New(a); ok {
		t.Fatal("New(net.Pipe()) = ok; a pipe has no socket")
	}
}
