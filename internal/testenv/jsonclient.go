package testenv

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// JSONClient speaks the JSON API as load generators (wrk, ab) and the
// clients of other languages do: one keep-alive HTTP/1.1 connection,
// requests written whole, answers read with net/http's parser. Its own
// cost stays small beside the server's, which is what benchmarks of the
// server want.
type JSONClient struct {
	nc   net.Conn
	br   *bufio.Reader
	host string
}

// DialJSON connects to the server at url (http://host:port).
func DialJSON(url string) (*JSONClient, error) {
	host := strings.TrimPrefix(url, "http://")
	nc, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &JSONClient{nc: nc, br: bufio.NewReader(nc), host: host}, nil
}

// Post returns the bytes of a POST of the JSON body to path, to pass to
// Call as often as wanted.
func (c *JSONClient) Post(path, body string) []byte {
	return fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		path, c.host, len(body), body)
}

// Call sends one request made by Post and reads its answer, which must be
// a 200.
func (c *JSONClient) Call(req []byte) error {
	if _, err := c.nc.Write(req); err != nil {
		return err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return err
}

// Close closes the connection.
func (c *JSONClient) Close() error { return c.nc.Close() }
