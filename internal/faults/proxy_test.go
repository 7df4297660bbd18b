package faults

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"syscall"
	"testing"
	"time"
)

// echoServer echoes what it reads on every connection.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(t *testing.T, c net.Conn, msg string, within time.Duration) (string, error) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(within))
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

func TestProxy(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := roundTrip(t, c, "hello", 5*time.Second); err != nil || got != "hello" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}

	// A pause holds the bytes back; its end delivers them.
	end := p.Pause(rng, Up)
	var ne net.Error
	if _, err := roundTrip(t, c, "held", 200*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("paused: want a timeout, got %v", err)
	}
	end(false)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "held" {
		t.Fatalf("after the pause: %q, %v", buf, err)
	}

	// A reset reaches the client as ECONNRESET.
	if !p.ResetOne(rng) {
		t.Fatal("no connection to reset")
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(buf); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("after a reset: %v, want ECONNRESET", err)
	}
}
