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
// A cancelled acquire leaks nothing: with plain http the client cancels the
// poll on the server (a cancel frame; over HTTP/1.1 it half-closes the
// connection) and still reads the server's last answer; a grant made in
// that instant is released at once. Over https (or a caller's http.Client)
// it releases the lease ID instead.
//
// # Transport
//
// For http:// URLs (without a proxy, without Config.HTTPClient) the backend
// carries acquires, renewals and releases on one connection upgraded to
// sema-mux/1 (internal/wire/mux.go): every call in flight, waiting
// acquires included, shares it; calls are tagged and answered in any
// order, and the calls and answers that meet in time go out in one write
// each way. So a process with many goroutines taking locks costs the
// server one connection, and a hand-over of a hot lock about one write and
// one read on either side (mux.go says how). Everything else (describe,
// list, force-release, guarantees), and every call to a server that
// refuses the upgrade, goes through the backend's own small HTTP/1.1
// client: a pool of keep-alive connections on which the calling goroutine
// writes the request and reads the answer, with request bodies and the
// answer of a grant coded by hand (about half the CPU of net/http's
// client per call). On Linux the sockets are read and written with raw
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
//   - Over http://, a cancelled waiting Acquire is dequeued by a cancel
//     frame; its last answer (the cancellation, or a grant made in that
//     instant, which is given back) is awaited for up to two seconds.
//   - Over https, each waiting Acquire holds one HTTP/2 stream for as long
//     as it waits (one HTTP/1.1 connection if the server refused the
//     sema-mux upgrade).
//   - A server answer "closed" (shutting down) is reported as
//     sema.ErrUnavailable, not sema.ErrClosed: the server's leases outlive
//     its restart. sema.ErrClosed means this Backend was closed.
//   - Auth failures wrap ErrUnauthorized or ErrForbidden, which wrap
//     sema.ErrPermission. Holder IDs in Describe are only shown to admin tokens.
package remote
