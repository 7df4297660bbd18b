// Package server implements the sema HTTP/JSON API v1 (api/openapi.yaml)
// as an http.Handler over any sema.Backend, normally the embedded durable
// store of package store. The CLI (`sema serve`) owns the listener, TLS,
// signals and the backend's lifetime.
//
// # Requests
//
// Bodies are bounded (64 KiB, http.MaxBytesReader), decoded with unknown
// fields refused, and validated with the root package's validators before
// they reach the backend. Every error is an envelope with a stable code
// (wire.HTTPStatus is the table). Lease answers are encoded without
// reflection on the hot path.
//
// # Connections
//
// After net/http has answered a hot request (acquire, renew, release) on
// a plain-HTTP/1.1 keep-alive connection, the server hijacks the
// connection and serves its next requests itself (h1conn.go): its own
// parser for the plain head our clients send (fuzzed against net/http's),
// one write(2) per answer (raw system calls the scheduler does not hear
// about: internal/rawio says why), the http.Server's timeouts, and net/http's
// http.ReadRequest plus the same handlers for everything else. TLS stays
// with net/http. Shutdown waits for these connections; http.Server's own
// Shutdown does not know them.
//
// sema-mux/1 (GET /v1/mux with Upgrade, internal/wire/mux.go) carries a
// client's acquires, renewals and releases on one connection, tagged and
// answered in any order (mux.go): one goroutine per connection serves the
// frames of each read and writes their answers, with the grants its
// releases hand to polls of the same connection, in one write; polls and
// even immediate grants wait for the store without blocking it
// (store.AcquireDeferred), and answers from other goroutines are written
// without blocking them (a flusher goroutine takes what the socket does
// not). The Go client uses it for http:// URLs.
//
// # Long-poll
//
// An acquire with wait_ms > 0 waits in the backend's FIFO queue (the
// embedded store's, or the backend's own Blocker; other backends are
// polled on events and a bounded schedule), capped by Config.MaxWait.
// After one heartbeat interval without an outcome the server commits 200
// and writes a space each interval; the final envelope follows. The
// http.Server's read and write timeouts are extended per request through
// http.ResponseController, so they never cut a long-poll. A client that
// hangs up is dequeued (its request context ends); a grant that cannot be
// written is given back. Close (registered with RegisterOnShutdown)
// answers every waiter with the code "closed" and refuses new acquires.
//
// # Security
//
// Tokens come with a role: client (acquire, renew, release, describe,
// guarantees) or admin (also list, force-release, and any lease). They are
// looked up by SHA-256, so lookups leak nothing about a token's bytes. A
// lease is bound to the token that acquired it, by a fingerprint of the
// token (never the token itself) that the embedded store journals with
// the lease, so the binding survives restarts; another client token gets
// 403. Holder lease IDs are shown to admins only. Without tokens everyone
// is admin: NeedsAuth tells the CLI when that is refused (any address
// beyond loopback). /healthz and /metrics need no token: metrics carry no
// lock names.
//
// # Metrics
//
// A private Prometheus registry: sema_http_requests_total{route,code},
// sema_acquire_wait_seconds, sema_hold_seconds{reason} (embedded store),
// sema_grants_total, sema_lease_losses_total{reason},
// sema_force_releases_total, sema_waiting_requests, and for the embedded
// store sema_holders, sema_waiters, sema_expirations_total, plus Go and
// process collectors. There is deliberately no per-name label: a server
// may see millions of names, each a new series; `sema status`, `sema ls`
// and /v1/locks show per-name state instead.
package server
