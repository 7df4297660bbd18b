// Package file is the sema backend for the processes of one host, with
// nothing to install and no daemon (URL file:///abs/dir).
//
// Each semaphore name has one state file in the directory, named by the hex
// SHA-256 of the name (a name never becomes a path; the real name is stored
// inside, for List). The file holds the limit, the holders (lease ID, owner,
// host, pid, fencing token, weight, acquired/renewed/expires), a FIFO queue
// of waiters, and the token and ticket counters, in one checksummed record.
// Every step (acquire, renew, release, …) is one read-modify-write of that
// record under flock(2) on the file. Files are created whole (written
// aside, then linked into place) with mode 0600, and never deleted or
// renamed.
//
// Liveness comes from the kernel. A backend that opens a name's file takes
// a liveness slot: an open file description (OFD) lock on one byte of it.
// Every entry it writes names that slot. The kernel drops the lock when the
// process dies, however it dies (kill -9 included), and closing its
// descriptor raises an inotify IN_CLOSE_WRITE event: waiters reap the dead
// entries and the permits pass on at once, long before the TTL. A process
// that is alive but hung (SIGSTOP, a stuck syscall) keeps its slot, so its
// leases end only at their TTL: an entry is dropped when its expiry passes,
// whatever its slot.
//
// # Guarantees
//
//   - Scope: the processes of one host that open the same directory
//     (sema.ScopeHost), and the goroutines of each.
//   - Safety: at every instant the weights of a name's live leases sum to at
//     most its limit. Steps are atomic under the file's lock.
//   - FIFO: waiters of all processes share one ticket queue in the file.
//     Grants go strictly in arrival order and a later, smaller request never
//     overtakes an earlier one; TryAcquire fails while anyone is queued.
//     A release hands the permits to the queue head in the same step.
//   - Wake-up by events, not by polling: a waiter in the releasing backend
//     gets its grant through a channel. Waiters in other processes are woken
//     by inotify: IN_MODIFY when the file is written, IN_CLOSE_WRITE when a
//     process closes it or dies. A timer fires at the earliest lease expiry.
//     Config.Recheck (default 1s) bounds the wait if an event is lost.
//     Config.Poll (default 20ms) replaces inotify only when a watch cannot
//     be added.
//   - Fencing tokens are strictly increasing per name and stored in the
//     file: they never go back, also after every process exited. If the
//     counter may have been lost (a damaged file, or a write from before the
//     last reboot that may not have reached the disk), it restarts from the
//     wall clock in microseconds, above any token issued before.
//   - Expiry: the host's wall clock is the shared authority between
//     processes (every process of the host reads the same clock). The core
//     also ends a lease on its own monotonic deadline, before the file
//     could expire it.
//   - A damaged state file (truncated, garbage, a write torn by a crash) is
//     repaired, never trusted, and never a crash. Leases the repair cannot
//     see are covered by a "phantom" holder per live process. The phantom
//     blocks every grant until that process re-registers what it holds (at
//     its next step on the name), closes the file, or dies. A record in an
//     unknown format version is an error, not a repair: a newer sema may
//     own the file.
//
// # Caveats
//
//   - Linux only (OFD locks, inotify). Other platforms compile, and Open
//     returns errors.ErrUnsupported. Network file systems (NFS, SMB) are
//     refused.
//   - A step of the wall clock changes every lease's remaining time; the
//     core's monotonic deadline still ends a lease on the holder's side
//     first.
//   - Deleting a state file while processes use it breaks exclusion for
//     that name, as deleting a database file would; sema never does it.
//   - A phantom left by a repair for a process that is hung (not dead)
//     blocks the name until that process wakes, or up to sema.MaxTTL.
//   - One name's state is at most 1 MiB: a few thousand holders and
//     waiters. Each step rewrites it whole.
//   - Without Config.Sync a machine crash may lose the last writes; the
//     token guarantee holds anyway (see above), and every holder dies with
//     the machine.
package file
