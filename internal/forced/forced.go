// Package forced keeps the callbacks that a backend calls when it
// force-releases leases (sema.ForceNotifier).
package forced

import (
	"encoding/json"
	"sync"

	"github.com/sema-dev/sema"
)

// Notices is the set of callbacks registered with a backend. The zero value
// is ready to use.
type Notices struct {
	mu   sync.Mutex
	next int
	fs   map[int]func(sema.ForceNotice)
}

// Add registers f and returns the function that unregisters it.
func (n *Notices) Add(f func(sema.ForceNotice)) (stop func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fs == nil {
		n.fs = make(map[int]func(sema.ForceNotice))
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

// Tell calls every callback for each of ids, leases of name that by
// force-released, on a goroutine of its own: the caller may hold its
// locks.
func (n *Notices) Tell(name string, ids []string, by string) {
	if len(ids) == 0 {
		return
	}
	n.mu.Lock()
	fs := make([]func(sema.ForceNotice), 0, len(n.fs))
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
				f(sema.ForceNotice{Name: name, ID: id, By: by})
			}
		}
	}()
}

// Message is a force-release as backends publish it to other processes
// (Redis, PostgreSQL, etcd): JSON of this struct (see Encode).
type Message struct {
	Name string `json:"name"`
	ID   string `json:"id"`
	By   string `json:"by,omitempty"`
}

// Encode returns the message of the lease id of name that by
// force-released.
func Encode(name, id, by string) string {
	b, _ := json.Marshal(Message{Name: name, ID: id, By: by})
	return string(b)
}

// Heard tells every callback of an encoded message; one that does not
// decode is dropped.
func (n *Notices) Heard(msg string) {
	var m Message
	if json.Unmarshal([]byte(msg), &m) == nil {
		n.Tell(m.Name, []string{m.ID}, m.By)
	}
}
