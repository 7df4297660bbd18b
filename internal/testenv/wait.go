package testenv

import (
	"testing"
	"time"
)

// HangGuard bounds a test's wait for something that must happen, so that
// a test that would hang fails with its own message instead. It is no
// measure of speed: far beyond what a loaded machine takes.
const HangGuard = 2 * time.Minute

// WaitFor polls cond every few milliseconds until it holds; past
// HangGuard it fails the test, saying what it waited for.
func WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(HangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not reached in %v", what, HangGuard)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Await returns the value ch delivers; past HangGuard it fails the test,
// saying what it waited for.
func Await[T any](tb testing.TB, what string, ch <-chan T) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(HangGuard):
		tb.Fatalf("%s: not done in %v", what, HangGuard)
		panic("unreachable")
	}
}
