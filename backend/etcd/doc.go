// Package etcd is the sema backend on an etcd cluster (URL
// etcd://host:2379,host2:2379/prefix; etcds:// over TLS): the choice for
// fleets that need the strongest guarantee — linearizable, and still
// there when a member of the cluster is lost.
//
// It uses the official client, go.etcd.io/etcd/client/v3 (v3.5; its tests
// run against etcd 3.4).
//
// # How it works
//
// Every lease — holder or waiter — is one key in the name's queue, on an
// etcd lease of its own (the sema lease's TTL, kept alive by the core's
// renewals; a waiter's by the waiting call). Its create revision orders
// the queue (FIFO) and is the lease's fencing token. The holders are the
// longest head of the queue whose weights fit in the limit: a waiter is
// granted when the entries ahead of it leave, never before an earlier one.
// Each step is one Txn with compares on revisions:
//
//   - acquire puts the entry if no entry of another limit exists (else
//     sema.ErrLimitMismatch) and reads the tail of the queue, so a waiter
//     knows the entry just ahead; TryAcquire puts it only if nobody waits
//     and the permits are free. A lock's entry has a state key beside it
//     (Prefix + "r/…", on the same etcd lease), put in the same Txn;
//   - renew is a keepalive of the entry's etcd lease (on one long-lived
//     stream) beside a read that the entry is still the one granted: it
//     never re-creates anything;
//   - release deletes the entry if its create revision is still the one
//     granted, so a late or repeated release never touches a newer lease;
//     a lock's release also sets the entry's state key to "released".
//
// A waiter watches only what is ahead of it: the entry just ahead, or, once
// every entry ahead holds, the deletions of the queue, counted against
// what is ahead. A release thus wakes the one waiter it can serve. Behind a
// lock's entry that waits, the waiter watches that entry's state key, one
// key that tells all it needs: "released" means the entry held, so nothing
// is ahead of the waiter any more, and the lock is handed on with no read
// of the queue; the key's deletion (the entry left while waiting, or its
// etcd lease ended) sends the waiter to read the queue. (Behind an entry
// put by an older sema client, with no state key, it watches the entry
// itself.) A semaphore's waiter granted after a wait marks its entry
// (rewrites it, in the background), so that the waiter just behind a
// grant that leaves room is woken; a lock's holder marks it only once it
// has held for 100ms, for Describe.
//
// Watches start at the current revision, which etcd serves at once (a
// watch from a past revision, as etcd's own concurrency.Mutex starts,
// waits for a catch-up loop that runs every 100ms); one read after the
// watch exists closes the gap (a read the member serves itself, no round
// of the leader). etcd reads that revision just before it registers the
// watch, so a write in between still leaves an occasional watch to the
// catch-up loop, and a queue moves no faster than its slowest watch: every
// waiter opens its watch twice and takes each event from whichever
// delivers it first. Waiters of the
// same process are woken in-process. A bounded re-check (Config.Recheck)
// guards against a lost event.
//
// # Guarantees
//
//   - Scope: every process of every host that reaches the cluster
//     (sema.ScopeCluster). Linearizable: each step is one etcd transaction
//     or read, served by the leader's quorum.
//   - Safety: at every revision, the weights of a name's holders sum to at
//     most its limit; the core's local deadline ends a lease before etcd
//     can expire it.
//   - FIFO without barging; a waiter that dies leaves the queue when its
//     etcd lease expires (Config.WaiterTTL at most).
//   - Fencing tokens are etcd revisions: strictly increasing per name over
//     every grant, durable, and unchanged by compaction, restarts and
//     leader changes. To fence writes inside etcd itself, compare a key of
//     yours in the same Txn.
//   - Expiry by etcd's clock: a holder that dies frees its permits when its
//     etcd lease expires, within its TTL and about half a second.
//   - Force-release marks holders (a key under Prefix + "f/"), and every
//     client watches those marks: a holder still alive learns at once
//     (sema.ErrForceReleased), or at its next renewal if the watch missed
//     the mark (it was being made again after a leader change, say); its
//     renewals no longer keep its etcd lease alive. Their entries, and so
//     their permits, stay until their etcd leases expire or their holders
//     release them, unless ForceOptions.Now deletes them at once. A
//     renewal already past its check when the mark lands extends the etcd
//     lease one last time: the permits then free up to one TTL later,
//     never earlier.
//
// # Caveats
//
//   - etcd counts lease TTLs in whole seconds: an etcd lease lasts the
//     TTL rounded up, plus one second (so that a lease released and taken
//     again within that second needs no keepalive), and at least etcd's
//     own minimum (1.5 election timeouts): a crashed holder of a TTL of
//     100ms holds for two seconds or more. etcd checks expiries every
//     500ms.
//   - A leader change extends every lease by its TTL (etcd's rule), so a
//     dead holder may hold that much longer.
//   - Acquire costs a Txn (and a keepalive beside it when the etcd lease
//     it reuses was last renewed over a second ago), and one more, the
//     mark, if it waited: a semaphore's unless the waiter behind it is of
//     the same backend, a lock's if it holds for 100ms; release a Txn;
//     TryAcquire on a busy name reads it. A name's keys are reused by each
//     process, but every key ever written stays in etcd's index until a
//     compaction: run etcd with auto-compaction.
//   - Describe in another process shows a lock's holder that waited as
//     acquired when it queued, for its first 100ms of holding.
//   - A request with a TTL longer than Config.WaiterTTL waits on a lease of
//     that TTL and moves to one of its own when granted (one more Txn).
//   - AcquiredAt, ExpiresAt and a waiter's Since are this process's clock,
//     as etcd does not report times. A holder's ExpiresAt in Describe is
//     exact for a lease of this client; for another client's, it is etcd's
//     remaining TTL rounded up to whole seconds (the lease ends no later).
//   - An Acquire repeating the lease ID of a request still queued by the
//     same client is refused (sema.ErrInvalidArgument); repeated by another
//     client, it queues an entry of its own.
//   - Restoring etcd from an older snapshot takes revisions, and so
//     tokens, back, unless the restore bumps them (etcdutl snapshot restore
//     --bump-revision).
//   - With a user and password, etcd checks the password with bcrypt for
//     every new client: each sema run process, as each etcdctl, waits for
//     it (here about 50ms more a run, at etcd's default --bcrypt-cost). A
//     client certificate whose common name is the user (etcd's
//     --client-cert-auth) authenticates without it.
package etcd
