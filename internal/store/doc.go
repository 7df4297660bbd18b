// Package store is the embedded durable store of `sema serve`: an
// in-memory engine of FIFO counting semaphores with leases (the same
// semantics as backend/mem) whose every state change is journaled to a
// write-ahead log in a data directory, so that leases and fencing tokens
// survive a restart of the server, including kill -9 at any instant.
//
// # Design
//
// Acquires never block their caller (acquire.go): AcquireAsync answers
// through a function, once, when its grant is on disk or it is refused;
// the blocking Acquire, TryAcquire and AcquireAs wait for that answer.
//
// State changes happen under one mutex, and each appends a record to an
// in-memory log buffer under that same mutex, so the order of the log is
// the order of the changes. A committer goroutine writes the buffer and
// fsyncs it in batches (group commit): everything that arrived while the
// previous fsync ran goes out with one write and one fsync. Who waits:
//
//   - A grant (and a renewal that raises a lease's TTL) is returned to the
//     caller only once its record is on disk. A grant that never reaches
//     disk was never seen by anyone, so losing it in a crash is harmless;
//     if the caller is gone by then, the grant is given back.
//   - A force-release that keeps the permits taken until the lease ends
//     (the default) is answered once its REVOKE record is on disk: after a
//     restart its holder still cannot renew the lease, and Describe still
//     shows it force-released.
//   - Releases, expiries and force-releases with ForceOptions.Now are
//     appended without waiting. Losing one in a crash keeps a permit held
//     for one more TTL, never frees it twice. Because the log is
//     sequential and a grant is appended after the end that made room for
//     it, a grant on disk implies every end before it is on disk: recovery
//     never sees a new holder without the end of the old one.
//   - Renewals with an unchanged TTL are not journaled at all. Instead,
//     every lease recovered after a restart gets a fresh full TTL from the
//     restart (it only ever extends a lease, so it is safe): a holder that
//     keeps renewing keeps its lease, and a dead holder's permits come back
//     one TTL after the restart.
//
// Fast handoff (fast.go): under contention, waiting for an fsync on every
// handoff would cap a hot name at one handoff per fsync. So the first
// handoff on a name journals a FAST record (and waits for it); later
// handoffs on that name are answered before their own record is on disk.
// If the store crashes, such a grant may be unknown after the restart, so
// recovery fences every name whose FAST record is not followed by an
// UNFAST one (written when the name goes idle): it grants nothing on it
// until one full recorded TTL after the restart, by which time the holder
// of a lost grant, unable to renew, has seen its lease end. Leases of the
// name that reached disk are honoured as usual. The fence shows in
// Describe as a holder with token 0 and owner "(recovery fence)"; an
// admin's force-release of the whole name lifts it.
//
// Fencing tokens come from one counter for the whole store, journaled in
// every grant record and in snapshots. Handoffs answered early use tokens
// covered by a RESERVE record already on disk (reserved a million ahead).
// After a restart the counter resumes from the largest token or
// reservation on disk, which is at least every token ever returned. A
// reservation on disk is also marked in a small file of its own
// (reserve.go): a log that ends below the mark has lost data, and Open
// refuses it unless Config.AcceptDataLoss.
//
// Records are framed with their length and a CRC-32C. A frame that is cut
// short or fails its checksum at the end of the last segment, with no
// valid frame after it, is the torn end of a write interrupted by a crash:
// it was never acknowledged and is dropped. Any other defect is corruption
// and a clear error from [Open], never a panic and never a guess. A
// well-formed record with a value requests may no longer carry (the rules
// grew stricter) is honoured, with a warning.
//
// The log is split into segments. When it has grown by
// Config.SnapshotBytes (and twice the last snapshot), the store rotates to
// a new segment n and, in the same critical section, captures the state
// as snapshot n; once the snapshot is on disk, older segments and
// snapshots are deleted. Open recovers from the newest snapshot and the
// segments after it, then writes a fresh snapshot and starts a new
// segment.
//
// # Guarantees
//
//   - At every instant the weights of a name's live leases sum to at most
//     its limit, also across restarts: a restart restores every lease that
//     was ever returned and not yet ended on disk.
//   - Tokens are strictly increasing per name (one counter for the store)
//     and never go back, not even after kill -9.
//   - A lease returned before a crash is still honoured after the restart
//     (renew and release work, with its expiry at least one full TTL after
//     the restart) — or, for a handoff answered before its fsync on a
//     contended name, the name is fenced: nothing is granted on it until
//     one full TTL after the restart.
//   - Waiters are served strictly FIFO per name, with no barging; expiry
//     runs on the monotonic clock from one timer (no polling), a little
//     late rather than ever early.
//   - One process at a time: the data directory is locked with flock.
//
// # Caveats
//
//   - Waiters are not durable: a restart drops the queue (clients retry).
//   - A lease whose holder died before a restart, or whose release was
//     lost in the crash, is held for one more full TTL after the restart.
//   - A renewal of a force-released lease that had already ended before a
//     restart reports a plain expiry after it, not a force-release.
//   - An uncontended grant costs one fsync of latency (shared by every
//     grant of the batch), not one fsync per grant; a handoff on a hot name
//     costs none.
//   - After a crash, a name that had contention refuses grants for one TTL
//     (the recovery fence), even if no handoff was actually lost.
//   - Tokens jump by up to a million after a restart (the reservation).
//   - A snapshot copies the state under the lock: with a million leases the
//     store pauses for a fraction of a second each time the log has grown
//     by twice the state's size. List copies under the lock too.
package store
