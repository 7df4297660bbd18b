package postgres

import (
	"strconv"
	"testing"
	"time"
)

// The hints forget a lease once it ended, a queue once busyFor has
// passed, and empty a full map rather than grow with leases their holders
// never release.
func TestHints(t *testing.T) {
	var h hints
	if h.ended("a", "1") || h.isBusy("a") {
		t.Fatal("empty hints know a lease or a name")
	}
	h.granted("a", "1")
	if h.ended("b", "1") || h.ended("a", "2") {
		t.Fatal("another name or ID ended")
	}
	if !h.ended("a", "1") || h.ended("a", "1") {
		t.Fatal("a lease granted did not end exactly once")
	}
	for i := range maxHints + 1 {
		h.granted("n", strconv.Itoa(i))
	}
	if len(h.free) != 1 || !h.ended("n", strconv.Itoa(maxHints)) {
		t.Fatalf("after %d leases the hints hold %d, want only the last", maxHints+1, len(h.free))
	}

	h.queued("q")
	if !h.isBusy("q") || h.isBusy("r") {
		t.Fatal("the name with a queue is not busy, or another one is")
	}
	h.busy["q"] = time.Now().Add(-busyFor)
	if h.isBusy("q") {
		t.Fatalf("a name is still busy %v after its queue", busyFor)
	}
}
