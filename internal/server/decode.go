package server

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/wire"
)

// errBadRequest marks a body that is not one valid JSON object of the
// expected shape.
var errBadRequest = errors.New("bad request")

// decodeJSON reads exactly one JSON object into v. Unknown fields, a
// second value and a body over wire.MaxBodyBytes (when body comes from
// http.MaxBytesReader) are errors wrapping sema.ErrInvalidArgument.
func decodeJSON(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("data after the JSON object")
			if terr != nil && !errors.As(terr, new(*json.SyntaxError)) {
				err = terr
			}
		}
	}
	if err == nil {
		return nil
	}
	if errors.As(err, new(*http.MaxBytesError)) {
		return fmt.Errorf("%w: %w", errTooLarge, sema.ErrInvalidArgument)
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("empty body")
	}
	return fmt.Errorf("%w: %w: %s", errBadRequest, sema.ErrInvalidArgument, err.Error())
}

// ttlOf converts ttl_ms (0: the default) and checks its range.
func ttlOf(ms int64) (time.Duration, error) {
	if ms == 0 {
		ms = wire.DefaultTTLMillis
	}
	if ms < 0 || ms > int64(sema.MaxTTL/time.Millisecond) {
		return 0, fmt.Errorf("%w: ttl_ms %d out of range [%d, %d]", sema.ErrInvalidArgument, ms,
			sema.MinTTL.Milliseconds(), sema.MaxTTL.Milliseconds())
	}
	ttl := time.Duration(ms) * time.Millisecond
	return ttl, sema.ValidateTTL(ttl)
}

// decodeAcquire reads an acquire body and returns the request it asks for
// and how long it may wait (capped at maxWait).
func decodeAcquire(body io.Reader, maxWait time.Duration) (sema.Request, time.Duration, error) {
	bp := bodyBufs.Get().(*[]byte)
	defer putBodyBuf(bp)
	b, rerr := readAllInto((*bp)[:0], body)
	*bp = b
	return decodeAcquireBody(b, rerr, maxWait)
}

// decodeAcquireBody is decodeAcquire of a body already read (rerr: how
// reading it failed, if it did).
func decodeAcquireBody(b []byte, rerr error, maxWait time.Duration) (sema.Request, time.Duration, error) {
	var in wire.AcquireRequest
	if rerr != nil || !fastAcquire(b, &in) {
		if err := slowDecode(b, rerr, &in); err != nil {
			return sema.Request{}, 0, err
		}
	}
	return acquireRequest(&in, maxWait)
}

func acquireRequest(in *wire.AcquireRequest, maxWait time.Duration) (sema.Request, time.Duration, error) {
	req := sema.Request{Name: in.Name, ID: in.ID, Owner: in.Owner, Limit: in.Limit, Weight: in.Weight,
		Host: in.Host, PID: in.PID}
	if req.Limit == 0 {
		req.Limit = wire.DefaultLimit
	}
	if req.Weight == 0 {
		req.Weight = wire.DefaultWeight
	}
	if req.ID == "" {
		req.ID = rand.Text()
	}
	var err error
	if req.TTL, err = ttlOf(in.TTLMillis); err != nil {
		return sema.Request{}, 0, err
	}
	if in.WaitMillis < 0 {
		return sema.Request{}, 0, fmt.Errorf("%w: negative wait_ms", sema.ErrInvalidArgument)
	}
	wait := maxWait
	if in.WaitMillis < int64(maxWait/time.Millisecond) {
		wait = time.Duration(in.WaitMillis) * time.Millisecond
	}
	if err := req.Validate(); err != nil {
		return sema.Request{}, 0, err
	}
	return req, wait, nil
}

func decodeRenew(body io.Reader) (wire.RenewRequest, time.Duration, error) {
	bp := bodyBufs.Get().(*[]byte)
	defer putBodyBuf(bp)
	b, rerr := readAllInto((*bp)[:0], body)
	*bp = b
	return decodeRenewBody(b, rerr)
}

func decodeRenewBody(b []byte, rerr error) (wire.RenewRequest, time.Duration, error) {
	var in wire.RenewRequest
	if rerr != nil || !fastRenew(b, &in) {
		if err := slowDecode(b, rerr, &in); err != nil {
			return in, 0, err
		}
	}
	if err := checkLease(in.Name, in.ID); err != nil {
		return in, 0, err
	}
	ttl, err := ttlOf(in.TTLMillis)
	return in, ttl, err
}

func decodeRelease(body io.Reader) (wire.ReleaseRequest, error) {
	bp := bodyBufs.Get().(*[]byte)
	defer putBodyBuf(bp)
	b, rerr := readAllInto((*bp)[:0], body)
	*bp = b
	return decodeReleaseBody(b, rerr)
}

func decodeReleaseBody(b []byte, rerr error) (wire.ReleaseRequest, error) {
	var in wire.ReleaseRequest
	if rerr != nil || !fastRelease(b, &in) {
		if err := slowDecode(b, rerr, &in); err != nil {
			return in, err
		}
	}
	return in, checkLease(in.Name, in.ID)
}

// slowDecode decodes b into *in with encoding/json (what the fast decoder
// left to it) through a copy on the heap, so that in itself, filled by the
// fast path on most requests, stays on its caller's stack.
func slowDecode[T any](b []byte, rerr error, in *T) error {
	p := new(T)
	*p = *in
	err := decodeBody(b, rerr, p, func([]byte) bool { return false })
	*in = *p
	return err
}

func decodeForceRelease(body io.Reader) (wire.ForceReleaseRequest, error) {
	var in wire.ForceReleaseRequest
	if err := decodeJSON(body, &in); err != nil {
		return in, err
	}
	if err := sema.ValidateName(in.Name); err != nil {
		return in, err
	}
	if in.ID != "" {
		return in, sema.ValidateID(in.ID)
	}
	return in, nil
}

func checkLease(name, id string) error {
	if err := sema.ValidateName(name); err != nil {
		return err
	}
	return sema.ValidateID(id)
}
