package sema

import (
	"context"
	"errors"
	"testing"
	"time"
)

// grantAll grants every request at once and renews anything: the lease's
// own clock is what this test is about.
type grantAll struct{}

func (grantAll) TryAcquire(_ context.Context, req Request) (Grant, error) {
	now := time.Now()
	return Grant{Name: req.Name, ID: req.ID, Token: 1, Owner: req.Owner, Weight: req.Weight, Limit: req.Limit,
		AcquiredAt: now, ExpiresAt: now.Add(req.TTL)}, nil
}

func (grantAll) Renew(_ context.Context, name, id string, ttl time.Duration) (Grant, error) {
	now := time.Now()
	return Grant{Name: name, ID: id, Token: 1, AcquiredAt: now, ExpiresAt: now.Add(ttl)}, nil
}

func (grantAll) Release(context.Context, string, string) error { return nil }
func (grantAll) Close() error                                  { return nil }

// TestErrPastDeadline: past its local deadline a lease reports ErrExpired
// even if its timer has not run (a starved process): here the client's
// clock is moved past the deadline, and the timer is set for later.
func TestErrPastDeadline(t *testing.T) {
	c := New(grantAll{})
	defer c.Close()
	l, err := c.Mutex("d", WithTTL(time.Hour), WithoutKeepalive()).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("Err of a fresh lease: %v", err)
	}
	c.epoch = c.epoch.Add(-2 * time.Hour) // two hours pass for now(), none for the timer
	if err := l.Err(); !errors.Is(err, ErrExpired) {
		t.Fatalf("Err past the deadline = %v, want ErrExpired", err)
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed once Err reported the expiry")
	}
}
