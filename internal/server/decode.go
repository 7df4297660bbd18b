package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/wire"
)

// Request bodies are read whole (bounded by wire.MaxBodyBytes: by
// http.MaxBytesReader, or by the sema-mux frame), decoded by wire.Decode
// (unknown fields refused) and validated with the root package's
// validators before anything reaches the engine.

// errBadRequest marks a body that is not one valid JSON object of the
// expected shape.
var errBadRequest = errors.New("bad request")

// decodeBody decodes b into v; errors wrap errBadRequest and
// sema.ErrInvalidArgument.
func decodeBody(b []byte, v any) error {
	if err := wire.Decode(b, v); err != nil {
		return fmt.Errorf("%w: %w", errBadRequest, err)
	}
	return nil
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
func decodeAcquire(b []byte, maxWait time.Duration) (sema.Request, time.Duration, error) {
	var in wire.AcquireRequest
	if err := decodeBody(b, &in); err != nil {
		return sema.Request{}, 0, err
	}
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

func decodeRenew(b []byte) (wire.RenewRequest, time.Duration, error) {
	var in wire.RenewRequest
	if err := decodeBody(b, &in); err != nil {
		return in, 0, err
	}
	if err := checkLease(in.Name, in.ID); err != nil {
		return in, 0, err
	}
	ttl, err := ttlOf(in.TTLMillis)
	return in, ttl, err
}

func decodeRelease(b []byte) (wire.ReleaseRequest, error) {
	var in wire.ReleaseRequest
	if err := decodeBody(b, &in); err != nil {
		return in, err
	}
	return in, checkLease(in.Name, in.ID)
}

func decodeForceRelease(b []byte) (wire.ForceReleaseRequest, error) {
	var in wire.ForceReleaseRequest
	if err := decodeBody(b, &in); err != nil {
		return in, err
	}
	if err := sema.ValidateName(in.Name); err != nil {
		return in, err
	}
	if err := sema.ValidateOwner(in.By); err != nil {
		return in, fmt.Errorf("by: %w", err)
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
