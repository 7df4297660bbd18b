package remote

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/sema-dev/sema/internal/wire"
)

// Bounds on an answer's head.
const (
	maxHeaderLines = 100
	maxChunkLine   = 1024
)

var errMalformed = errors.New("malformed HTTP answer")

// readResponse reads one HTTP/1.x answer from br and appends its body to
// out. It understands what a server of this API sends: Content-Length,
// chunked bodies (long polls after a heartbeat) and bodies ended by
// closing the connection. 1xx answers are skipped. keep says whether the
// connection can carry another request.
func readResponse(br *bufio.Reader, out []byte) (status int, body []byte, keep bool, err error) {
	for {
		var clen int64 = -1
		chunked, closeConn := false, false
		line, err := readLine(br)
		if err != nil {
			return 0, out, false, err
		}
		status, http10, err := parseStatusLine(line)
		if err != nil {
			return 0, out, false, err
		}
		for n := 0; ; n++ {
			if n == maxHeaderLines {
				return 0, out, false, fmt.Errorf("%w: too many header lines", errMalformed)
			}
			line, err := readLine(br)
			if err != nil {
				return 0, out, false, err
			}
			if len(line) == 0 {
				break
			}
			name, value, ok := bytes.Cut(line, []byte(":"))
			if !ok || len(name) == 0 {
				return 0, out, false, fmt.Errorf("%w: header line %q", errMalformed, trim(line))
			}
			value = bytes.TrimSpace(value)
			switch {
			case bytes.EqualFold(name, []byte("Content-Length")):
				n, ok := wire.ParseLength(value)
				if !ok || (clen >= 0 && n != clen) {
					return 0, out, false, fmt.Errorf("%w: Content-Length %q", errMalformed, trim(value))
				}
				clen = n
			case bytes.EqualFold(name, []byte("Transfer-Encoding")):
				if !bytes.EqualFold(value, []byte("chunked")) {
					return 0, out, false, fmt.Errorf("%w: Transfer-Encoding %q", errMalformed, trim(value))
				}
				chunked = true
			case bytes.EqualFold(name, []byte("Connection")):
				closeConn = closeConn || containsToken(value, "close")
			}
		}
		if status >= 100 && status < 200 && status != 101 {
			continue // 100 Continue, 103 Early Hints: the answer follows
		}
		keep = !http10 && !closeConn
		if http10 {
			chunked = false // as net/http: HTTP/1.0 has no transfer codings
		}
		switch {
		case status == 204 || status == 304 || status == 101:
			return status, out, keep && status != 101, nil
		case chunked:
			out, err = readChunked(br, out)
		case clen >= 0:
			if clen > maxResponse {
				return 0, out, false, errTooLarge
			}
			out, err = readN(br, out, int(clen))
		default:
			out, err = readAllBounded(br, out)
			keep = false
		}
		return status, out, keep && err == nil, err
	}
}

// parseStatusLine parses "HTTP/1.x NNN reason".
func parseStatusLine(line []byte) (status int, http10 bool, err error) {
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' ||
		(len(line) > 12 && line[12] != ' ') {
		return 0, false, fmt.Errorf("%w: status line %q", errMalformed, trim(line))
	}
	for _, d := range line[9:12] {
		if d < '0' || d > '9' {
			return 0, false, fmt.Errorf("%w: status line %q", errMalformed, trim(line))
		}
		status = status*10 + int(d-'0')
	}
	return status, line[7] == '0', nil
}

// readLine returns one CRLF- (or LF-) terminated line without its end.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: line longer than %d bytes", errMalformed, br.Size())
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
			if len(line) == 0 {
				err = io.EOF
			}
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

func readN(br *bufio.Reader, out []byte, n int) ([]byte, error) {
	start := len(out)
	out = grow(out, n)
	if _, err := io.ReadFull(br, out[start:start+n]); err != nil {
		return out[:start], unexpected(err)
	}
	return out[:start+n], nil
}

func readChunked(br *bufio.Reader, out []byte) ([]byte, error) {
	for {
		line, err := readLine(br)
		if err != nil {
			return out, unexpected(err)
		}
		if len(line) > maxChunkLine {
			return out, fmt.Errorf("%w: chunk line too long", errMalformed)
		}
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		size, ok := parseHex(bytes.TrimSpace(line))
		if !ok {
			return out, fmt.Errorf("%w: chunk size %q", errMalformed, trim(line))
		}
		if size == 0 {
			for n := 0; ; n++ { // trailers, then the empty line
				if n == maxHeaderLines {
					return out, fmt.Errorf("%w: too many trailer lines", errMalformed)
				}
				line, err := readLine(br)
				if err != nil {
					return out, unexpected(err)
				}
				if len(line) == 0 {
					return out, nil
				}
			}
		}
		if int64(len(out))+size > maxResponse {
			return out, errTooLarge
		}
		if out, err = readN(br, out, int(size)); err != nil {
			return out, err
		}
		if line, err := readLine(br); err != nil || len(line) != 0 {
			if err == nil {
				err = fmt.Errorf("%w: chunk not followed by CRLF", errMalformed)
			}
			return out, unexpected(err)
		}
	}
}

// readAllBounded reads until EOF, at most maxResponse bytes.
func readAllBounded(br *bufio.Reader, out []byte) ([]byte, error) {
	return readAll(br, out)
}

// grow makes room for n more bytes.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), len(b)+n+len(b)/2)
	copy(nb, b)
	return nb
}

func parseHex(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 12 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			n = n<<4 | int64(c-'0')
		case c >= 'a' && c <= 'f':
			n = n<<4 | int64(c-'a'+10)
		case c >= 'A' && c <= 'F':
			n = n<<4 | int64(c-'A'+10)
		default:
			return 0, false
		}
	}
	return n, true
}

// containsToken reports whether a comma-separated header value holds tok.
func containsToken(v []byte, tok string) bool {
	for len(v) > 0 {
		var part []byte
		part, v, _ = bytes.Cut(v, []byte(","))
		if bytes.EqualFold(bytes.TrimSpace(part), []byte(tok)) {
			return true
		}
	}
	return false
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func trim(b []byte) []byte {
	if len(b) > 60 {
		return b[:60]
	}
	return b
}
