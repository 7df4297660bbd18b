// Package backendtest is the conformance suite every sema backend passes.
//
// A backend's tests call [Run] with a [Config]:
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, backendtest.Config{
//			New: func(t *testing.T) sema.Backend { return mem.New() },
//		})
//	}
package backendtest

import (
	"testing"
	"time"

	"github.com/sema-dev/sema"
)

// Config describes the backend under test.
type Config struct {
	// New returns a backend for one subtest. It may return a fresh backend
	// or a new client of a shared server each time: every subtest uses its
	// own unique names. The suite closes what New returns.
	New func(t *testing.T) sema.Backend
	// TTL is the short lease TTL the expiry tests use (default 400ms).
	// Backends with coarse expiry (whole seconds) set it higher.
	TTL time.Duration
	// Reopen, if set, closes b and opens the same store again, as after a
	// restart of the backend; the suite checks tokens never go back.
	Reopen func(t *testing.T, b sema.Backend) sema.Backend
}
