package remote

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestSendReader: a request sent by the first read of its answer arrives
// whole, also when it is larger than the socket's buffers (the rest goes
// out through net.Conn), and the answer is read; an answer that never
// comes is EOF when the server closes.
func TestSendReader(t *testing.T) {
	for _, size := range []int{100, 4 << 20} {
		cc, sc := tcpPair(t)
		_ = cc.(*net.TCPConn).SetWriteBuffer(4096)
		req := bytes.Repeat([]byte{'x'}, size)
		got := make(chan []byte, 1)
		go func() {
			time.Sleep(20 * time.Millisecond) // the client's buffers fill first
			b := make([]byte, size)
			if _, err := io.ReadFull(sc, b); err != nil {
				got <- nil
				return
			}
			got <- b
			_, _ = sc.Write([]byte("answer\n"))
		}()
		sr := newSendReader(cc)
		if sr.raw == nil {
			t.Fatal("no raw access to a TCP connection")
		}
		sr.req = req
		_ = cc.SetDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(sr).ReadString('\n')
		if err != nil || line != "answer\n" {
			t.Fatalf("size %d: answer %q, %v", size, line, err)
		}
		if b := <-got; !bytes.Equal(b, req) {
			t.Fatalf("size %d: the server got %d bytes, not the request", size, len(b))
		}
	}

	cc, sc := tcpPair(t)
	go func() {
		b := make([]byte, 3)
		_, _ = io.ReadFull(sc, b)
		sc.Close()
	}()
	sr := newSendReader(cc)
	sr.req = []byte("abc")
	if _, err := bufio.NewReader(sr).ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("no answer: %v, want EOF", err)
	}
}

// TestSendReaderDeadline: the wait for an answer keeps the connection's
// deadline.
func TestSendReaderDeadline(t *testing.T) {
	cc, _ := tcpPair(t)
	sr := newSendReader(cc)
	sr.req = []byte("abc")
	_ = cc.SetDeadline(time.Now().Add(50 * time.Millisecond))
	var ne net.Error
	if _, err := bufio.NewReader(sr).ReadByte(); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("no answer before the deadline: %v, want a timeout", err)
	}
}

// TestPooledConnClosedByServer: a pooled connection the server closed
// while it was idle is noticed and the request goes out again on a new
// connection, whether the server closed it for good (its reset answers the
// request) or only half-closed it and kept it open (noticed by reading
// first, after maxQuietIdle).
func TestPooledConnClosedByServer(t *testing.T) {
	for _, half := range []bool{false, true} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		accepted := make(chan struct{}, 8)
		go func() {
			for {
				nc, err := l.Accept()
				if err != nil {
					return
				}
				accepted <- struct{}{}
				go func() {
					defer nc.Close()
					br := bufio.NewReader(nc)
					if _, err := http.ReadRequest(br); err != nil {
						return
					}
					_, _ = io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
					if half {
						_ = nc.(*net.TCPConn).CloseWrite()
						_, _ = io.Copy(io.Discard, br) // kept open
					}
				}()
			}
		}()
		p := newH1Pool(l.Addr().String(), "sema", time.Second, 4)
		call := func() {
			t.Helper()
			status, body, err := p.do(context.Background(), "POST", "/x", nil, []byte("{}"), "", time.Now().Add(5*time.Second), 0, false, nil)
			if err != nil || status != 200 || string(body) != "ok" {
				t.Fatalf("half=%v: %d %q %v", half, status, body, err)
			}
		}
		call()
		if half {
			time.Sleep(maxQuietIdle + 50*time.Millisecond)
		} else {
			time.Sleep(50 * time.Millisecond)
		}
		start := time.Now()
		call()
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("half=%v: the retry took %v", half, d)
		}
		if n := len(accepted); n != 2 {
			t.Fatalf("half=%v: %d connections, want 2", half, n)
		}
		p.close()
		l.Close()
	}
}
