package redis

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sema-dev/sema"
)

// The records the scripts keep per lease ID (see lua/common.lua):
//
//	holder: h<weight> <token> <acquired> <expires> <renewed> <revoked>\x1f<label>
//	waiter: w<weight> <since> <expires> <ttl> <channel>\x1f<label>
//	label:  <pid>\x1f<owner>\x1f<host>
//
// Times are milliseconds of Redis's clock. Owner and host labels hold no
// control characters (sema.Request.Validate), so \x1f separates them.

const sep = "\x1f"

// label is the record suffix of a request.
func label(req *sema.Request) string {
	return strconv.Itoa(req.PID) + sep + req.Owner + sep + req.Host
}

var errRecord = errors.New("malformed record")

// holderRecord is one decoded holder record.
type holderRecord struct {
	sema.Holder
	revoked bool
}

func decodeHolder(id, rec string) (holderRecord, error) {
	var h holderRecord
	nums, lbl, ok := strings.Cut(rec, sep)
	if !ok || !strings.HasPrefix(nums, "h") {
		return h, errRecord
	}
	f := strings.Split(nums[1:], " ")
	if len(f) != 6 || (f[5] != "0" && f[5] != "1" && f[5] != "2") {
		return h, errRecord
	}
	w, err1 := strconv.ParseInt(f[0], 10, 64)
	tok, err2 := strconv.ParseUint(f[1], 10, 64)
	acq, err3 := msTime(f[2])
	exp, err4 := msTime(f[3])
	ren, err5 := msTime(f[4])
	pid, owner, host, err6 := decodeLabel(lbl)
	if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil || w < 1 {
		return h, errRecord
	}
	h.Holder = sema.Holder{ID: id, Owner: owner, Token: tok, Weight: w, AcquiredAt: acq, RenewedAt: ren, ExpiresAt: exp, Host: host, PID: pid,
		ForceReleased: f[5] == "2"}
	h.revoked = f[5] == "1"
	return h, nil
}

// decodeWaiter decodes a waiter record and returns when its lease in the
// queue ends.
func decodeWaiter(rec string) (sema.WaiterInfo, time.Time, error) {
	var w sema.WaiterInfo
	nums, lbl, ok := strings.Cut(rec, sep)
	if !ok || !strings.HasPrefix(nums, "w") {
		return w, time.Time{}, errRecord
	}
	f := strings.Split(nums[1:], " ")
	if len(f) != 5 {
		return w, time.Time{}, errRecord
	}
	weight, err1 := strconv.ParseInt(f[0], 10, 64)
	since, err2 := msTime(f[1])
	exp, err3 := msTime(f[2])
	pid, owner, host, err4 := decodeLabel(lbl)
	if err := errors.Join(err1, err2, err3, err4); err != nil || weight < 1 {
		return w, time.Time{}, errRecord
	}
	return sema.WaiterInfo{Owner: owner, Weight: weight, Since: since, Host: host, PID: pid}, exp, nil
}

func decodeLabel(lbl string) (pid int, owner, host string, err error) {
	p, rest, ok1 := strings.Cut(lbl, sep)
	owner, host, ok2 := strings.Cut(rest, sep)
	if !ok1 || !ok2 || strings.Contains(host, sep) {
		return 0, "", "", errRecord
	}
	if pid, err = strconv.Atoi(p); err != nil || pid < 0 {
		return 0, "", "", errRecord
	}
	return pid, owner, host, nil
}

// msTime reads milliseconds of Redis's clock.
func msTime(s string) (time.Time, error) {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms < 0 || ms > 1<<50 {
		return time.Time{}, errRecord
	}
	return time.UnixMilli(ms), nil
}

// A script's answer is an array of integers and strings.

func reply(v any) ([]any, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: unexpected answer %T from Redis", ErrCorrupt, v)
	}
	return a, nil
}

// intAt returns element i of a as an integer (an integer reply, or a
// string of one).
func intAt(a []any, i int) (int64, error) {
	if i >= len(a) {
		return 0, fmt.Errorf("%w: short answer from Redis (%d elements)", ErrCorrupt, len(a))
	}
	switch x := a[i].(type) {
	case int64:
		return x, nil
	case string:
		if n, err := strconv.ParseInt(x, 10, 64); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%w: element %d of the answer is %T %v, not an integer", ErrCorrupt, i, a[i], a[i])
}

func stringAt(a []any, i int) (string, error) {
	if i < len(a) {
		if s, ok := a[i].(string); ok {
			return s, nil
		}
	}
	return "", fmt.Errorf("%w: element %d of the answer is not a string", ErrCorrupt, i)
}

// ints reads the integers of a from index from on.
func ints(a []any, from, n int) ([]int64, error) {
	out := make([]int64, n)
	for i := range out {
		v, err := intAt(a, from+i)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// checkGrant rejects a grant no script makes: a token below 1 (it would
// turn into a huge uint64 token), or an expiry not after the grant.
func checkGrant(token, acquired, expires int64) error {
	if token < 1 || expires <= acquired {
		return fmt.Errorf("%w: a grant with token %d, acquired %d ms, expires %d ms", ErrCorrupt, token, acquired, expires)
	}
	return nil
}

// holdersAt decodes the pairs (lease ID, holder record) of a from index
// from on, skipping revoked records.
func holdersAt(a []any, from int) ([]sema.Holder, error) {
	var hs []sema.Holder
	for i := from; i+1 < len(a); i += 2 {
		id, err1 := stringAt(a, i)
		rec, err2 := stringAt(a, i+1)
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		h, err := decodeHolder(id, rec)
		if err != nil {
			return nil, fmt.Errorf("%w: lease %q: %v", ErrCorrupt, id, err)
		}
		if !h.revoked {
			hs = append(hs, h.Holder)
		}
	}
	return hs, nil
}

// decodeStatus turns the describe script's answer into the status of
// name: the live holders and waiters at Redis's instant.
func decodeStatus(name string, v any) (sema.Status, error) {
	st := sema.Status{Name: name}
	a, err := reply(v)
	if err != nil {
		return st, err
	}
	now, err := intAt(a, 0)
	if err != nil {
		return st, err
	}
	if len(a) != 3 {
		return st, fmt.Errorf("%w: describe answered %d elements", ErrCorrupt, len(a))
	}
	fields, err1 := reply(a[1])
	queue, err2 := reply(a[2])
	if err := errors.Join(err1, err2); err != nil {
		return st, err
	}
	nowT := time.UnixMilli(now)
	waiters := make(map[string]string)
	var limit int64
	for i := 0; i+1 < len(fields); i += 2 {
		f, err1 := stringAt(fields, i)
		rec, err2 := stringAt(fields, i+1)
		if err := errors.Join(err1, err2); err != nil {
			return st, err
		}
		switch {
		case f == ".m": // "<limit> <used> …"
			l, _, _ := strings.Cut(rec, " ")
			if limit, err = strconv.ParseInt(l, 10, 64); err != nil {
				return st, fmt.Errorf("%w: counters %q", ErrCorrupt, rec)
			}
		case strings.HasPrefix(f, "."):
		case strings.HasPrefix(rec, "h"):
			h, err := decodeHolder(f, rec)
			if err != nil {
				return st, fmt.Errorf("%w: lease %q: %v", ErrCorrupt, f, err)
			}
			if !h.revoked && h.ExpiresAt.After(nowT) {
				st.Holders = append(st.Holders, h.Holder)
				st.Used += h.Weight
			}
		default:
			waiters[f] = rec
		}
	}
	for _, q := range queue {
		id, ok := q.(string)
		if !ok {
			return st, fmt.Errorf("%w: queue entry %T", ErrCorrupt, q)
		}
		rec, ok := waiters[id]
		if !ok {
			continue
		}
		w, exp, err := decodeWaiter(rec)
		if err != nil {
			return st, fmt.Errorf("%w: waiter %q: %v", ErrCorrupt, id, err)
		}
		if exp.After(nowT) {
			st.Waiters = append(st.Waiters, w)
		}
	}
	if len(st.Holders) > 0 || len(st.Waiters) > 0 {
		st.Limit = limit
	}
	return st, nil
}
