package wire

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzParseMuxAnswerHead: any answer head either fails with ErrMuxFrame or
// gives a status and a body size within bounds that encode back to the
// same head.
func FuzzParseMuxAnswerHead(f *testing.F) {
	f.Add(AppendMuxAnswer(nil, 7, 200, []byte(`{}`))[:MuxAnswerHead])
	f.Add(AppendMuxAnswer(nil, 0, 599, nil)[:MuxAnswerHead])
	f.Add(bytes.Repeat([]byte{0xff}, MuxAnswerHead))
	f.Add(make([]byte, MuxAnswerHead))
	f.Fuzz(func(t *testing.T, h []byte) {
		if len(h) < MuxAnswerHead {
			return // the reader always hands over a whole head
		}
		h = h[:MuxAnswerHead]
		tag, status, size, err := ParseMuxAnswerHead(h)
		if err != nil {
			if !errors.Is(err, ErrMuxFrame) {
				t.Fatalf("ParseMuxAnswerHead(%x): %v wraps no ErrMuxFrame", h, err)
			}
			return
		}
		if status < 100 || status > 599 || size < 0 || size > MuxMaxAnswer {
			t.Fatalf("ParseMuxAnswerHead(%x) = status %d, size %d", h, status, size)
		}
		if again := AppendMuxAnswer(nil, tag, status, make([]byte, size))[:MuxAnswerHead]; !bytes.Equal(again, h) {
			t.Fatalf("ParseMuxAnswerHead(%x) re-encodes to %x", h, again)
		}
	})
}
