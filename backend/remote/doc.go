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
// A cancelled acquire leaks nothing: over sema-mux the client cancels the
// poll on the server (a cancel frame) and still reads the server's last
// answer; a grant made in that instant is released at once. Over HTTP (a
// caller's http.Client, a proxy, a server that refuses sema-mux) it
// releases the lease ID instead, which also withdraws the request if it is
// still queued.
//
// # Transport
//
// The backend carries acquires, renewals and releases on one connection
// upgraded to sema-mux/1 (internal/wire/mux.go), over TLS for https://
// URLs: every call in flight, waiting acquires included, shares it; calls
// are tagged and answered in any order, and the calls and answers that
// meet in time go out in one write each way. So a process with many
// goroutines taking locks costs the server one connection, and a
// hand-over of a hot lock about one write and one read on either side
// (mux.go says how). The server tells the connection at once of a lease
// of this caller that was force-released (a notice), so that its holder
// learns before its next renewal. Everything else (describe, list,
// force-release, guarantees), and every call to a server that refuses the
// upgrade or sits behind a proxy, or made through Config.HTTPClient, goes
// through net/http (HTTP/2 over TLS). The request bodies and lease answers of the
// calls every lock takes are coded by internal/wire without reflection.
//
// # Caveats
//
//   - A TryAcquire (or a Renew or Release) whose request reached the server
//     but whose answer was lost to a network failure returns an error
//     wrapping sema.ErrUnavailable; the lease it may have created stays on
//     the server until its TTL. A cancelled context, in contrast, makes the
//     client give such a grant back at once.
//   - Over HTTP (not sema-mux), a cancelled acquire gives back by lease ID
//     on another connection; that release also withdraws the request if it
//     is still queued, but if it overtakes the acquire request itself, a
//     grant made later stays until its TTL. sema-mux does not have this
//     window.
//   - A long poll that outlives the server's cap (or Config.MaxWait) is
//     sent again and queues behind the waiters that came meanwhile.
//   - Over sema-mux, a cancelled waiting Acquire is dequeued by a cancel
//     frame; its last answer (the cancellation, or a grant made in that
//     instant, which is given back) is awaited for up to two seconds.
//   - Over HTTP, each waiting Acquire holds one HTTP/2 stream (https) or
//     one HTTP/1.1 connection for as long as it waits.
//   - A server answer "closed" (shutting down) is reported as
//     sema.ErrUnavailable, not sema.ErrClosed: the server's leases outlive
//     its restart. sema.ErrClosed means this Backend was closed.
//   - Auth failures wrap ErrUnauthorized or ErrForbidden, which wrap
//     sema.ErrPermission. Holder IDs in Describe are only shown to admin tokens.
package remote
