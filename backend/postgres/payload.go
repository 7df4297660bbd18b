package postgres

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sema-dev/sema"
)

// grantMsg is one grant announced by a NOTIFY (see grant_waiters in
// functions.sql): enough for the waiting request to become a sema.Grant
// without another query.
type grantMsg struct {
	id       string
	token    int64
	acquired int64 // µs since the Unix epoch, by the database's clock
}

// maxPayload is PostgreSQL's limit on a NOTIFY payload (8000 bytes), with
// room to spare.
const maxPayload = 8000

var errPayload = errors.New("malformed grant notification")

// parsePayload reads a grant notification: entries "id,token,acquired-µs"
// separated by single spaces. Anything else is an error: a notification
// sent on a sema channel by someone else, or a version mismatch.
func parsePayload(p string) ([]grantMsg, error) {
	if p == "" || len(p) > maxPayload {
		return nil, fmt.Errorf("%w: %d bytes", errPayload, len(p))
	}
	out := make([]grantMsg, 0, 1+strings.Count(p, " "))
	for entry := range strings.SplitSeq(p, " ") {
		id, rest, ok1 := strings.Cut(entry, ",")
		tok, at, ok2 := strings.Cut(rest, ",")
		if !ok1 || !ok2 || sema.ValidateID(id) != nil {
			return nil, fmt.Errorf("%w: entry %q", errPayload, clip(entry))
		}
		token, ok1 := positive(tok)
		acquired, ok2 := positive(at)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%w: entry %q", errPayload, clip(entry))
		}
		out = append(out, grantMsg{id: id, token: token, acquired: acquired})
	}
	return out, nil
}

// positive reads a positive decimal integer as PostgreSQL prints one: no
// sign, no leading zero.
func positive(s string) (int64, bool) {
	if s == "" || s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
