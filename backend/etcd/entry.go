package etcd

import (
	"cmp"
	"encoding/json"
	"slices"
	"time"

	"github.com/sema-dev/sema"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// value is what an entry key holds (JSON): which lease, who asked, for
// how much, when. The limit and name are in the key; the token is the
// key's create revision; the expiry is the etcd lease's.
type value struct {
	ID      string `json:"i"`
	Owner   string `json:"o,omitempty"`
	Weight  int64  `json:"w"`
	Host    string `json:"h,omitempty"`
	PID     int    `json:"p,omitempty"`
	TTL     int64  `json:"t"`           // requested TTL, ms
	Since   int64  `json:"s"`           // when the request was made, Unix ns (client clock)
	Granted int64  `json:"g,omitempty"` // when a waiter saw its grant, Unix ns; 0 if granted at once
}

func encodeValue(v value) string {
	b, _ := json.Marshal(v) // cannot fail: plain fields
	return string(b)
}

// entry is one key of a name's queue as read from etcd.
type entry struct {
	key    string
	id     string // the sema lease ID (from the value)
	limit  int64
	rev    int64 // create revision: queue order and fencing token
	mod    int64 // mod revision
	lease  clientv3.LeaseID
	val    value
	broken bool // the value did not decode: it counts as the whole limit
}

// decodeEntry reads an entry from a key-value of the queue. A key that is
// not an entry key gives ok false; a value that does not decode gives an
// entry marked broken, which blocks the whole limit (safe: nobody is let
// in beside something unknown) until its lease ends or an admin
// force-releases it.
func (k keys) decodeEntry(kv *mvccpb.KeyValue) (name string, e entry, ok bool) {
	name, limit, ok := k.parseEntryKey(string(kv.Key))
	if !ok {
		return "", entry{}, false
	}
	e = entry{key: string(kv.Key), limit: limit, rev: kv.CreateRevision, mod: kv.ModRevision,
		lease: clientv3.LeaseID(kv.Lease)}
	if err := json.Unmarshal(kv.Value, &e.val); err != nil || e.val.Weight < 1 || e.val.Weight > limit ||
		sema.ValidateID(e.val.ID) != nil {
		e.broken = true
		e.val = value{Owner: "(unreadable entry)", Weight: limit}
	}
	e.id = e.val.ID
	return name, e, true
}

// queue is the entries of one name in create-revision order (the FIFO
// order), as of one revision. A waiter reads only the newest entries up to
// its own: older counts the entries it did not read, all ahead of entries
// (at least one if there are any; as last counted, some may have left).
type queue struct {
	name    string
	entries []entry
	older   int64
}

// sortQueue puts entries in queue order.
func sortQueue(es []entry) {
	slices.SortFunc(es, func(a, b entry) int { return cmp.Compare(a.rev, b.rev) })
}

// limit is the limit the name's entries agree on: the first entry's (an
// acquire checks in its Txn that all entries have one limit).
func (q *queue) limit() int64 {
	if len(q.entries) == 0 {
		return 0
	}
	return q.entries[0].limit
}

// holders returns how many leading entries are holders: the longest prefix
// whose weights fit in the limit. FIFO without barging makes this the exact
// set of holders at the queue's revision: a waiter is granted when the
// entries ahead of it leave, never before an earlier one.
func (q *queue) holders() int {
	lim := q.limit()
	var sum int64
	for i, e := range q.entries {
		sum += e.val.Weight
		if sum > lim || e.limit != lim {
			return i
		}
	}
	return len(q.entries)
}

// index returns the position of lease id in the queue, or -1.
func (q *queue) index(id string) int {
	for i := range q.entries {
		if q.entries[i].id == id {
			return i
		}
	}
	return -1
}

// used sums the weights of the first n entries.
func (q *queue) used(n int) int64 {
	var sum int64
	for _, e := range q.entries[:n] {
		sum += e.val.Weight
	}
	return sum
}

// holder describes entry e as a holder (ExpiresAt and RenewedAt are
// filled in by the caller, which asks etcd for the lease's time to live).
func (e *entry) holder() sema.Holder {
	acq := e.val.Granted
	if acq == 0 {
		acq = e.val.Since
	}
	return sema.Holder{ID: e.id, Owner: e.val.Owner, Token: uint64(e.rev), Weight: e.val.Weight,
		AcquiredAt: time.Unix(0, acq), Host: e.val.Host, PID: e.val.PID}
}

// status summarises the queue. Holders have no expiry yet.
func (q *queue) status() sema.Status {
	n := q.holders()
	st := sema.Status{Name: q.name, Limit: q.limit(), Used: q.used(n),
		Holders: make([]sema.Holder, 0, n), Waiters: []sema.WaiterInfo{}}
	for i := range q.entries {
		e := &q.entries[i]
		if i < n {
			st.Holders = append(st.Holders, e.holder())
			continue
		}
		st.Waiters = append(st.Waiters, sema.WaiterInfo{Owner: e.val.Owner, Weight: e.val.Weight,
			Since: time.Unix(0, e.val.Since), Host: e.val.Host, PID: e.val.PID})
	}
	return st
}

// fits reports whether a request of weight w would be granted at once:
// nobody waits and w more permits fit in limit.
func (q *queue) fits(limit, w int64) bool {
	n := len(q.entries)
	return q.holders() == n && q.used(n)+w <= limit
}

// heldError is the answer to a try that did not fit.
func (q *queue) heldError() error {
	n := q.holders()
	st := q.status()
	return &sema.HeldError{Name: q.name, Limit: q.limit(), Holders: st.Holders, Waiters: len(q.entries) - n}
}
