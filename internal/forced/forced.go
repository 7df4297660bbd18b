// Package forced keeps the callbacks that a backend calls when it
// force-releases leases it granted (sema.ForceNotifier).
package forced

import "sync"

// Notices is the set of callbacks registered with a backend. The zero value
// is ready to use.
type Notices struct {
	mu   sync.Mutex
	next int
	fs   map[int]func(name, id string)
}

// Add registers f and returns the function that unregisters it.
func (n *Notices) Add(f func(name, id string)) (stop func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fs == nil {
		n.fs = make(map[int]func(name, id string))
	}
	k := n.next
	n.next++
	n.fs[k] = f
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		delete(n.fs, k)
	}
}

// Tell calls every callback with name and each of ids, on a goroutine of
// its own: the caller may hold its locks.
func (n *Notices) Tell(name string, ids []string) {
	if len(ids) == 0 {
		return
	}
	n.mu.Lock()
	fs := make([]func(name, id string), 0, len(n.fs))
	for _, f := range n.fs {
		fs = append(fs, f)
	}
	n.mu.Unlock()
	if len(fs) == 0 {
		return
	}
	go func() {
		for _, f := range fs {
			for _, id := range ids {
				f(name, id)
			}
		}
	}()
}
