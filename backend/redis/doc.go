// Package redis is the sema backend on Redis 7 or later, one server or a
// Redis Cluster (URLs redis://, rediss://), with go-redis v9.
//
//	b, err := redis.Open(ctx, "redis://127.0.0.1:6379/0")
//	client := sema.New(b)
//
// Each name has three keys, Prefix + "{" + escaped name + "}" + ":s", ":q"
// and ":t" (Config.Prefix, default "sema:"): a hash with the name's
// counters and one record per lease (ID, owner, host, pid, weight, fencing
// token, acquired, renewed, expires, revoked), a sorted set that is the
// FIFO queue of waiters, and the token counter. The name is
// percent-escaped, so it never breaks the braces, which are the Redis
// Cluster hash tag: a name's keys live in one slot. Every operation
// (acquire, renew, release, leave the queue, force-release, describe) is
// one Lua script (lua/*.lua, run with EVALSHA and loaded again on
// NOSCRIPT), atomic on the server; each reclaims the leases whose expiry
// has passed before it decides. A call alone goes out at once on a pooled
// connection; calls a process makes while others are in flight are
// written and answered together (go-redis's autopipeliner).
//
// # Guarantees
//
//   - Scope: every process on every host that reaches the Redis server or
//     cluster (sema.ScopeCluster). On one server without failover, every
//     operation is atomic and the weights of a name's live leases never
//     exceed its limit.
//   - Expiry is decided by Redis's clock (TIME inside the scripts), never
//     a client's. The core also ends a lease on its own monotonic
//     deadline, before Redis could expire it.
//   - FIFO: waiters are granted in arrival order; a later, smaller request
//     never overtakes an earlier one, and TryAcquire fails while anyone
//     waits. A release grants the head waiters whose weight now fits, in
//     the same script, and wakes only them: the grant is published on the
//     channel of the waiting process (Prefix + "w:" + a random ID), which
//     needs no further round trip. A waiter that misses its message finds
//     its grant within Config.Recheck (default 1s); the waiter at the head
//     also looks when the earliest holder's lease is due to expire, so
//     expired permits pass on without a release. There is no polling loop
//     and no thundering herd.
//   - A force-release (name, lease ID and ForceOptions.By, in JSON) is
//     published on Prefix + "forced", to which a client subscribes once it
//     holds a lease or waits (in the background after its first grant):
//     the holder learns at once, not at its next renewal (unless the
//     message is lost, or came before the subscription was made).
//   - A waiter holds a lease of its own in the queue (3×Recheck, renewed
//     at every re-check): a dead waiter never blocks the queue for longer.
//     On one server a grant whose waiter has no subscribed connection (its
//     process died) is not made at all: the queue moves on at once.
//   - Fencing tokens are strictly increasing per name, and never below
//     Redis's clock in microseconds. With the append-only file and
//     appendfsync always (checked at Open with CONFIG GET on every primary
//     and reported as Guarantees.DurableFencing), the counter survives any
//     restart. Without persistence, a restart loses it, and tokens restart
//     from the clock: still above every earlier one unless Redis's clock
//     went back. The counter key has no TTL; everything else of a name
//     carries one and goes when the name is idle.
//   - Replication: by default a grant is answered as soon as the primary
//     made it. Redis replicates asynchronously, so a failover (Sentinel or
//     Cluster) can lose a grant that was answered, and a second holder can
//     get in: Guarantees.SurvivesFailover is false. With
//     Config.WaitReplicas = n (URL wait_replicas=n) every grant and renewal
//     is followed by WAIT n in the same round trip and counts only once n
//     replicas acknowledged it; otherwise it is given back and the caller
//     gets sema.ErrUnavailable. A failover then keeps the grant if it
//     promotes one of those replicas (wait for as many replicas as could
//     be promoted). WAIT does not make Redis linearizable:
//     Guarantees.Linearizable is false in both modes.
//
// # Caveats
//
//   - Redis 7.0 or later: the scripts declare their flags ("#!lua"), so
//     Redis refuses to start one when it is out of memory instead of
//     failing it halfway.
//   - Sentinel (redis+sentinel://) is not supported: connect to the
//     primary, and set wait_replicas if a failover must not lose grants.
//   - In a cluster, PUBLISH cannot tell whether a waiter's process is
//     alive: a waiter that dies keeps its place until its queue lease ends
//     (3×Recheck), and a grant made to it in that window stays until its
//     TTL.
//   - Grant messages travel on Redis pub/sub, which drops them while a
//     connection is down; waiters then find their grants at their next
//     re-check (go-redis reconnects and re-subscribes, and a waiter looks
//     again at once when it does).
//   - A lease's times are milliseconds of the clock of the Redis primary
//     that granted it; after a failover the new primary's clock decides.
//   - Keys changed by hand, or of the wrong type, make the name's
//     operations fail with an error wrapping ErrCorrupt (and
//     sema.ErrUnavailable), never a wrong grant; deleting the name's ":s"
//     and ":q" keys clears it (keep ":t", the token counter).
//   - An idle name keeps its token counter key forever: a few dozen bytes
//     per name ever used.
package redis
