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
// aside, then linked into place) with mode 0600 (0660 in a host-wide
// directory), and never renamed.
//
// # Reclaiming idle names
//
// A state file stays after its name's last use: jobs named by date would
// leave one file per day. [Backend.Reclaim] (the command sema gc, for
// example daily from cron) removes the files of names that nobody has
// held, waited for or had open for a while. Fencing tokens still never go
// back: the directory keeps a token floor (the file .token-floor), raised
// durably to a file's last token before the file is removed, and a new
// state file's counter starts from it. A name used again after a reclaim
// gets tokens above every one it had. Reclaim runs safely beside the
// processes that use the directory: it removes a file only under its
// state lock, while no process holds a liveness slot on it; a process
// that opened the file just before finds it unlinked at its first step and
// starts again on a new file.
//
// # Host-wide directories
//
// A directory is private to the user who owns it, unless it has the
// setgid bit: then it is host-wide, shared by every user of its group.
// Cron jobs and services of different users exclude each other on its
// names. An administrator makes one once, for example
//
//	install -d -m 2770 -g sema /var/lib/sema   # or /run/sema (tmpfs: see Caveats)
//
// and adds the users to the group sema; they use file:///var/lib/sema.
// Its state files are created with mode 0660, and the setgid bit gives
// them the directory's group. A process may ring another's doorbell (see
// below) if it runs as the same user, as root, or, in a host-wide
// directory, with the directory's group among its groups; other rings are
// dropped unread. Without the permission a lock fails with an error that
// names the lock, the directory and what to fix (group membership, the
// directory's mode, or a state file made before the directory was
// host-wide). Leave the sticky bit off: it would keep users from
// reclaiming each other's idle names.
//
// Liveness comes from the kernel. A backend that opens a name's file takes
// a liveness slot: an open file description (OFD) lock on one byte of it.
// Every entry it writes names that slot. The kernel drops the lock when the
// process dies, however it dies (kill -9 included), and closing its
// descriptor raises an inotify IN_CLOSE_WRITE event: the waiter queued just
// behind the dead process drops its entries and the permits pass on at
// once, long before the TTL. A process that is alive but hung (SIGSTOP, a
// stuck syscall) keeps its slot, so its leases end only at their TTL: an
// entry is dropped when its expiry passes, whatever its slot.
//
// Hand-off between processes goes through the kernel to the one process it
// serves. A process that waits for a name binds a doorbell: an abstract
// unix datagram socket whose address is made of the state file's inode and
// its liveness slot, so that it needs no entry of its own. The step that
// grants a waiter (a release, a death, an expiry) writes the state, then
// rings the doorbell of the granted waiter's process with the grant as
// written; that process hands it to its Acquire without taking the state
// lock. No other process is woken: a write of the state wakes nobody. A
// doorbell was chosen over the other kernel primitives because the Go
// runtime's poller waits on it without a thread per waiting name (a
// byte-range lock or a futex would block one thread each), it needs no
// file in the directory (a FIFO would be left behind by a killed process),
// and the kernel frees it when its process dies.
//
// A force-release rings the doorbells of the holders it ended, so that
// they learn at once rather than at their next renewal. A holder's
// doorbell is bound by the backend's janitor about a second after the
// grant, which keeps it off the path of short leases: a lease
// force-released before that is told at its next renewal, as are the
// leases of a process holding more than 128 names at once (each doorbell
// is a file descriptor).
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
//     gets its grant through a channel; a waiter in another process through
//     its doorbell, rung by the step that granted it (and only its process
//     is woken; for a semaphore, only the processes of the waiters the
//     release serves). The death of a process (IN_CLOSE_WRITE) wakes the
//     waiters, which look at the liveness of the processes they wait
//     behind only; the one just behind a dead one reads the state. A timer
//     fires at the earliest lease expiry. Config.Recheck (default 1s)
//     bounds the wait if an event is lost. Config.Poll (default 20ms)
//     replaces the events only when a doorbell cannot be bound or an
//     inotify watch added.
//   - Fencing tokens are strictly increasing per name and stored in the
//     file: they never go back, also after every process exited, and after
//     the name's file was reclaimed (the directory's token floor). If the
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
//   - Linux only (OFD locks, inotify, abstract unix sockets). Other
//     platforms compile, and Open returns errors.ErrUnsupported. Network
//     file systems (NFS, SMB) are refused.
//   - In a host-wide directory, a ring from another user is accepted after
//     reading its process's groups in /proc: where /proc hides other
//     users' processes (mount option hidepid), such rings are dropped and
//     waiters of different users are served by their re-check
//     (Config.Recheck) instead.
//   - Doorbells live in the network namespace of their process: processes
//     in different network namespaces (containers with their own network)
//     that share a directory do not hear each other's rings, and such a
//     waiter is served by its re-check (Config.Recheck) or its timer at a
//     lease's expiry.
//   - A step of the wall clock changes every lease's remaining time; the
//     core's monotonic deadline still ends a lease on the holder's side
//     first.
//   - Deleting a state file while processes use it breaks exclusion for
//     that name, as deleting a database file would; Reclaim removes only
//     unused ones. Deleting the token floor (or a reclaimed directory on
//     tmpfs, such as /run, after a reboot) lets a reclaimed or new name's
//     tokens start again from 1.
//   - A phantom left by a repair for a process that is hung (not dead)
//     blocks the name until that process wakes, or up to sema.MaxTTL.
//   - One name's state is at most 1 MiB: a few thousand holders and
//     waiters. Each step rewrites it whole.
//   - Without Config.Sync a machine crash may lose the last writes; the
//     token guarantee holds anyway (see above), and every holder dies with
//     the machine.
package file
