// Package remote is the Go client of a sema server (`sema serve`): the
// backend for URLs http://host:port and https://host:port.
//
//	b, err := remote.New(remote.Config{URL: "http://127.0.0.1:7543", Token: tok})
//	client := sema.New(b)
//
// It speaks the HTTP/JSON API v1 (internal/wire). A blocking Acquire is a
// long poll: the request waits in the server's FIFO queue for the name and
// the answer is the grant, so a release hands over to the next waiter
// within one round trip, without client-side polling.
//
// # Guarantees
//
// Exclusion among every process on every host that reaches the server.
// Expiry runs on the server's clock. Whether waiters are served FIFO, whether
// operations are linearizable and whether fencing tokens survive a restart
// is what the server's store declares; Guarantees asks the server
// (GET /v1/guarantees, once) and reports that, with Scope cluster. With the
// embedded store of `sema serve`, all three hold: leases and token counters
// are written to disk before they are granted.
//
// Every call respects its context: a server that stops answering cannot
// keep a renewal past the lease's local deadline, so the lease's context is
// cancelled before the server could give the permits to anyone else.
//
// Retries reuse the lease ID, which the server treats as an idempotency
// key: a repeated acquire returns the same lease, never a second one. A
// request whose keep-alive connection broke is sent again, and a blocking
// Acquire retries transient failures (an unreachable or restarting server)
// for up to Config.RetryTimeout.
//
// A cancelled acquire leaks nothing: with plain http the client half-closes
// the connection, which ends the request on the server, and still reads the
// server's last answer; a grant made in that instant is released at once.
// Over https (or a caller's http.Client) it releases the lease ID instead.
//
// # Transport
//
// For http:// URLs (without a proxy, without Config.HTTPClient) the backend
// uses its own small HTTP/1.1 client: a pool of keep-alive connections on
// which the calling goroutine writes the request and reads the answer, with
// request bodies and the answer of a grant coded by hand. It costs about
// half the CPU of net/http's client per call, which matters when the lock
// server is on the same few cores. A release that no context can cancel
// (the core's Lease.Release; Release with a context without Done) and that
// overlaps another goes on one of two pipelined connections instead:
// concurrent releases go out in one write and their answers come back in
// one, in order. On Linux the sockets are read and written with raw
// system calls (internal/rawio). https goes through net/http (HTTP/2).
//
// # Caveats
//
//   - A TryAcquire (or a Renew or Release) whose request reached the server
//     but whose answer was lost to a network failure returns an error
//     wrapping sema.ErrUnavailable; the lease it may have created stays on
//     the server until its TTL. A cancelled context, in contrast, makes the
//     client give such a grant back at once.
//   - Over https, a cancelled acquire gives back by lease ID on another
//     connection; if that release reaches the server before the cancelled
//     request's disconnect does, a grant made in between stays until its
//     TTL (the server cannot tell). Plain http does not have this window.
//   - A long poll that outlives the server's cap (or Config.MaxWait) is
//     sent again and queues behind the waiters that came meanwhile.
//   - Each waiting Acquire holds one HTTP/1.1 connection (one stream with
//     https and HTTP/2) for as long as it waits.
//   - A server answer "closed" (shutting down) is reported as
//     sema.ErrUnavailable, not sema.ErrClosed: the server's leases outlive
//     its restart. sema.ErrClosed means this Backend was closed.
//   - Auth failures wrap ErrUnauthorized or ErrForbidden, which wrap
//     sema.ErrPermission. Holder IDs in Describe are only shown to admin tokens.
package remote
