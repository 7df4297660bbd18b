package postgres

import (
	"strconv"
	"testing"
)

// freeGrants forgets a lease once taken, and empties itself when full
// rather than grow with leases their holders never release.
func TestFreeGrants(t *testing.T) {
	var f freeGrants
	if f.take("a", "1") {
		t.Fatal("an empty set has a lease")
	}
	f.add("a", "1")
	if f.take("b", "1") || f.take("a", "2") {
		t.Fatal("another name or ID was taken")
	}
	if !f.take("a", "1") || f.take("a", "1") {
		t.Fatal("a lease added was not taken exactly once")
	}
	for i := range maxFreeGrants + 1 {
		f.add("n", strconv.Itoa(i))
	}
	if len(f.m) != 1 || !f.take("n", strconv.Itoa(maxFreeGrants)) {
		t.Fatalf("after %d leases the set holds %d, want only the last", maxFreeGrants+1, len(f.m))
	}
}

// The listener counts the waiters of each name, whatever their IDs.
func TestWaitingByName(t *testing.T) {
	l := newListener(nil, nil)
	a, b, c := l.register("x", "1"), l.register("x", "2"), l.register("y", "1")
	if l.waiting("x") != 2 || l.waiting("y") != 1 || l.waiting("z") != 0 {
		t.Fatalf("waiting: x %d, y %d, z %d; want 2, 1, 0", l.waiting("x"), l.waiting("y"), l.waiting("z"))
	}
	l.unregister(a)
	l.unregister(c)
	if l.waiting("x") != 1 || l.waiting("y") != 0 || len(l.byName) != 1 {
		t.Fatalf("after two left: x %d, y %d, %d names; want 1, 0, 1", l.waiting("x"), l.waiting("y"), len(l.byName))
	}
	l.unregister(b)
	if len(l.byName) != 0 {
		t.Fatalf("%d names counted after every waiter left", len(l.byName))
	}
}
