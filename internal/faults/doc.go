// Package faults proves, on every backend, that sema keeps what the backend
// declares in its Guarantees while processes crash and stall, servers
// restart and connections break. Its test, TestFaults, runs worker
// processes against each backend, injects faults, records everything on one
// clock, and checks the history.
//
// # The run
//
// Workers are the test binary run again as separate processes. Each opens
// the backend by URL (sema.Open) and loops through the public library:
// TryAcquire or Acquire (with a deadline) on a mutex and on semaphores of
// limits 2 and 3 with random weights, a hold of random length, refreshes
// (Lease.Refresh) every TTL/3, keepalive on for a third of the leases, and
// Release — or, now and then, none: the lease expires. While it holds a
// lease a worker writes to the fenced resource (Resource) every TTL/8 with
// the lease's token, after checking Lease.Err. A worker that notices it
// was stalled writes at once without checking, as a holder paused between
// its check and its write would.
//
// Every operation is journaled with its invocation and completion times on
// CLOCK_MONOTONIC (Now), which all processes of the host share: result,
// lease ID, token, weight, limit, and the lease's local deadline as the
// worker can vouch for it — the invocation time of the grant or of the last
// confirmed refresh plus TTL − margin, a lower bound of the library's own
// deadline, which counts from when it sent the request. Each write to the
// resource is logged by the resource itself, in its order, with its time
// and verdict, and the worker adds when it last saw its lease valid; each
// Done the worker sees is journaled too. The harness records its own
// operations (Describe every few tens of milliseconds, force-releases) and
// the faults, with their start and end.
//
// # Faults
//
//   - kill -9 of a worker that holds, or waits for, a name (found with
//     Describe, by the holder's PID), replaced by a fresh worker;
//   - SIGSTOP of a holder for 1.2–2.5 TTL, then SIGCONT: its lease expires
//     meanwhile, and it writes when it wakes;
//   - force-release of every holder of a held name, by `sema release
//     --force` half the time and by Client.ForceRelease the other half;
//     half of them plain (the permits stay taken until the old holder's
//     deadline, the default), half with --now (sema.ForceNow: they free
//     at once);
//   - for a server (sema serve, Redis, PostgreSQL): kill -9 and SIGTERM
//     (PostgreSQL: a fast shutdown) of the server, restarted on the same
//     data; for etcd: kill -9 of one member, or of the leader, restarted
//     on its data after up to a TTL;
//   - through a TCP proxy between the workers and each server (Proxy):
//     connections reset (one or all, calls in flight included), paused
//     both ways, or with the server's answers left unread as by a client
//     that stops reading — each pause then resumed (late bytes delivered)
//     or reset.
//
// Client clock jumps are not injected, by decision: the library measures
// every deadline and renewal interval on the monotonic clock
// (time.Since), so a step of the client's wall clock is not observable by
// it, and a faketime-style library cannot reach Go's vDSO clock reads
// anyway. What remains is the rate of the monotonic clock, which NTP slews
// by at most 0.05%: the library allows 0.1% between the client's and the
// backend's clock and a margin of TTL/5. (The file backend expires leases
// by the host's wall clock: a step of it is a step of the backend's clock,
// a caveat that backend declares; stepping the clock of a shared machine
// is not something a test may do.) A suspended machine stops
// CLOCK_MONOTONIC: a holder on a laptop that sleeps past its TTL believes
// its lease for as long as it slept; only fencing protects against that,
// as against SIGSTOP.
//
// # Checks
//
// A violation fails the test with the shortest evidence found; for
// linearizability, porcupine's visualization is written to the run's
// directory, which a failed run keeps and prints.
//
//   - Tokens: unique per name, and a grant that returned before another
//     was asked for has the smaller token.
//   - Overlap: at no instant do the weights of the leases whose holders
//     believe them valid exceed the limit. A holder believes its lease from
//     the grant's return to the earliest of: its release call, the local
//     deadline it can vouch for, the Done it saw, its process's death or
//     exit, and a force-release with --now that reported it. A plain
//     force-release does not end the belief: the permits must stay taken
//     until the old holder learns or its deadline passes.
//   - Fencing, for the mutex: the resource's accepted tokens never
//     decrease; a write made while its lease was believed valid is
//     accepted (else a token went back, or two holders overlapped); and a
//     write by a holder after a lease granted after its own had written
//     first is rejected — whatever stalled it.
//   - Describe: the holders' weights never exceed the limit, and a lease
//     known to be over (released, force-released) never shows again — but
//     a plainly force-released one, marked force-released, while its
//     permits stay taken; and outside the window after a crash of the
//     server, which may bring back for one TTL a lease whose end was not
//     yet on disk.
//   - Linearizability of each name's history against the model below,
//     with porcupine.
//
// # The model
//
// The state of a name is the set of leases the backend may hold, each
// with its weight and two times, and the highest token granted:
//
//   - drop: the lease may be gone for an operation that returns after it —
//     its local deadline (a lower bound of it, see above), or its process's
//     death on a backend that frees a dead holder's permits at once;
//   - expire: it is surely gone for an operation invoked after it — one TTL
//     plus a slack after the last request that could have renewed it
//     reached the backend (for a keepalive lease, its end).
//
// Operations: a grant needs token > the highest and room for its weight,
// made by dropping leases past their drop time (one successor state per
// minimal choice: porcupine's nondeterministic model); a TryAcquire that
// found the permits taken needs them taken — by the leases the state may
// still hold, or by a waiter that may have been queued (a TryAcquire fails
// while anyone waits: FIFO), or by a restart's recovery fence, or by
// leases that acquires of unknown outcome may have left; a confirmed
// refresh needs the lease and moves its drop time; a refresh that found it
// lost, or a release that found it gone, needs it gone or past its drop
// time; a confirmed release needs it and removes it; a force-release needs
// every lease it reported and no other lease short of its drop time, and
// removes them with --now; plainly, it keeps them as force-released:
// counted until their drop time, never renewed, possibly gone once their
// old holder released them or a force-release with --now came. A crash
// of sema serve may lose any lease (a handoff answered before its fsync;
// the name is then fenced) and bring back a force-released one; a crash
// of sema serve or PostgreSQL may bring back a released one (their
// releases do not wait for the disk; a later grant's durable write
// carries them); every restart extends expire by one TTL.
//
// Operations whose outcome is unknown — an error that says nothing, a
// process killed mid-call, a release that found the lease gone while its
// connection broke (the library sends such a request again, and the first
// may have taken effect) — may take effect up to the slack after they
// returned: the longest connection pause plus a second, as the proxy
// delivers held bytes at the latest when a pause ends.
//
// Why it is sound (a correct backend passes): a lease's drop time is never
// later than the library's local deadline, which comes before the backend
// can expire the lease; its expire time is never earlier than the backend's
// expiry; every choice the model leaves open (which lease expired, whether
// an unknown operation took effect, whether a waiter was queued) is
// explored or granted. The shortcuts taken (dropping only what an
// operation needs, counting the leases of unknown acquires where they
// could explain a refusal rather than in the state, allowing an expiry
// whenever drop < the operation's return instead of tracking one
// linearization point) only make the model more permissive.
//
// Why it is not vacuous: between drop and expire a lease is optional, but
// before drop it must be there — so a second holder within a holder's
// deadline, a lost lease its holder can still renew, a refresh of a
// released or force-released lease, a token that goes back, a refusal
// that nothing explains after every lease surely expired, are each
// illegal. TestModel runs the model on small legal and illegal histories,
// and the bugs this harness was shown to catch in its quick mode (an
// off-by-one in the limit check, a release that ignores the lease ID, a
// renew that re-creates a lease, a token counter that restarts after a
// crash, a plain force-release that frees the permits before the old
// holder's deadline) are caught by several checks at once.
//
// # Backends
//
// Each backend is checked against what it declares: the table in
// engines_test.go says how to start it and which faults apply, and the run
// fails if the backend does not declare what those faults assume.
//
//   - file:// (one host, no daemon): the holder faults (kill -9 of holders
//     and waiters, SIGSTOP, force-release). There is no server to restart
//     and no connection to break. The kernel frees a dead holder's permits
//     at once, which the checks hold it to.
//   - http:// (sema serve on its embedded store): every fault: holder
//     faults, connection faults through the proxy, kill -9 and SIGTERM of
//     the server.
//   - redis:// (one server, append-only file with appendfsync always, so
//     that it declares durable fencing): holder, connection and restart
//     faults. Redis declares itself not linearizable because replication
//     is asynchronous; on one server every step is one atomic script, and
//     the checks, linearizability included, hold it to that. Not injected:
//     a failover (Sentinel, Cluster, replicas), which may lose an answered
//     grant (SurvivesFailover is false), and a restart without
//     persistence, which loses leases and the token counter by design.
//   - postgres:// (one primary): holder, connection and restart faults
//     (kill -9 of the postmaster runs crash recovery). Not injected: a
//     failover to a standby, which keeps grants only with synchronous
//     replication (SurvivesFailover is false).
//   - etcd:// (three members, one proxy each): holder and connection
//     faults, kill -9 of a member and of the leader. A leader change
//     extends every lease by its TTL (etcd's rule), which the model allows
//     as for any restart. Not injected: a restore from an old snapshot,
//     which takes revisions (tokens) back unless --bump-revision is used.
//
// No backend gets clock faults (see above).
//
// To add a backend, add an entry: start its engine with internal/testenv,
// put a Proxy in front of it when it is reached over the network, give
// restart for each restart fault it gets, and list only the faults its
// Guarantees cover.
//
// # Modes
//
// `go test ./internal/faults` (and `./scripts/test.sh`) runs the quick
// mode: 12 seconds per backend, two backends at a time, 5 workers, a
// fault every 400 ms, TTL 1 s. A run in which fewer than one lease a
// second was granted, or a worker gave up, fails: it would prove nothing.
// The long mode runs as long as SEMA_FAULTS_DURATION says, per backend,
// with names that change every 30 seconds so that the history is checked
// in pieces:
//
//	SEMA_FAULTS_DURATION=10m nice -n 10 go test -race -timeout 0 -parallel 1 -run TestFaults ./internal/faults
//
// Other variables: SEMA_FAULTS_BACKENDS=file,serve,redis,postgres,etcd
// picks backends;
// SEMA_FAULTS_SEED repeats a run's random choices (the workers' timing
// still varies); SEMA_FAULTS_KEEP=1 keeps the run's directory even when it passes, and
// SEMA_FAULTS_CHECK=dir checks a kept run again (TestCheckKept).
package faults
