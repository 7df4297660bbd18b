package wire

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzParseMuxRequest: any bytes parse into a frame, "need more" or
// ErrMuxFrame, never a panic or a frame beyond the input; frames built by
// AppendMuxRequest parse back.
func FuzzParseMuxRequest(f *testing.F) {
	f.Add(AppendMuxRequest(nil, 7, MuxAcquire, []byte(`{"name":"a"}`)))
	f.Add(AppendMuxRequest(nil, 0, MuxCancel, nil))
	f.Add([]byte{0, 1, 0, 6, 0, 0, 0, 1, 1})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, p []byte) {
		tag, op, body, n, err := ParseMuxRequest(p)
		switch {
		case err != nil:
			if !errors.Is(err, ErrMuxFrame) || n != 0 {
				t.Fatalf("error %v with n %d", err, n)
			}
			return
		case n == 0:
			return
		}
		if n > len(p) || n != MuxRequestHead+len(body) || len(body) > MaxBodyBytes || op < MuxAcquire || op > MuxCancel {
			t.Fatalf("frame n=%d body %d op %d of %d bytes", n, len(body), op, len(p))
		}
		again := AppendMuxRequest(nil, tag, op, body)
		if !bytes.Equal(again, p[:n]) {
			t.Fatalf("round trip: %x vs %x", again, p[:n])
		}
	})
}

func TestMuxAnswerHead(t *testing.T) {
	a := AppendMuxAnswer(nil, 42, 409, []byte("{}\n"))
	tag, status, n, err := ParseMuxAnswerHead(a[:MuxAnswerHead])
	if err != nil || tag != 42 || status != 409 || n != 3 {
		t.Fatalf("%d %d %d %v", tag, status, n, err)
	}
	for _, bad := range [][]byte{
		{0, 0, 0, 5, 0, 0, 0, 1, 0, 200},        // shorter than its head
		{0, 0, 0, 6, 0, 0, 0, 1, 0, 7},          // status 7
		{0x7f, 0, 0, 0, 0, 0, 0, 1, 0, 200},     // 2 GB
		{0, 0x10, 0, 7, 0, 0, 0, 1, 0x02, 0x58}, // over MuxMaxAnswer
	} {
		if _, _, _, err := ParseMuxAnswerHead(bad); !errors.Is(err, ErrMuxFrame) {
			t.Errorf("%x: %v", bad, err)
		}
	}
}
