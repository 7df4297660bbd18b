// Package server implements the sema HTTP/JSON API v1 (api/openapi.yaml)
// as an http.Handler over any sema.Backend, normally the embedded durable
// store of package store. The CLI (`sema serve`) owns the listener, TLS,
// signals and the backend's lifetime.
//
// # Transports
//
// The JSON API, for every language and for curl, is served by net/http
// alone: HTTP/1.1, HTTP/2 over TLS, and h2c (HTTP/2 without TLS, by prior
// knowledge) when the http.Server allows it, as sema serve does. Go clients carry their acquires, renewals
// and releases on sema-mux/1 (GET /v1/mux with Upgrade, over plain HTTP/1.1
// or TLS; framing in internal/wire/mux.go): one connection per client
// process, calls tagged and answered in any order, each frame's op mapped
// to its call (mux.go). Both transports serve the same calls (calls.go).
//
// # Requests
//
// Bodies are read whole and bounded (64 KiB: http.MaxBytesReader, or the
// sema-mux frame), decoded with unknown fields refused (wire.Decode) and
// validated with the root package's validators before they reach the
// engine. Every error is an envelope with a stable code (wire.HTTPStatus
// is the table). Lease answers are encoded without reflection
// (wire.AppendLease).
//
// # Waiting
//
// The server waits in one way (wait.go): an acquire is a poll on the
// engine's asynchronous acquire, answered exactly once by whoever decides
// it — the engine's grant (once durable) or refusal, its wait_ms running
// out, the client leaving or cancelling, the server shutting down —
// without a goroutine of its own. The engine (engine.go) is the embedded
// store, which queues waiters FIFO itself, or any sema.Backend
// (backend.go), waited for on its Blocker or by polling on its events.
//
// An HTTP acquire with wait_ms > 0 is a long poll, capped by
// Config.MaxWait: after one heartbeat interval without an outcome the
// server commits 200 and writes a space each interval; the final envelope
// follows. The http.Server's read and write timeouts are extended per
// request through http.ResponseController, so they never cut a long poll.
// A client that hangs up is dequeued (its request context ends); a grant
// that cannot be written is given back. Over sema-mux there are no
// heartbeats: a cancel frame or the end of the connection dequeues.
//
// Close (registered with RegisterOnShutdown) answers every waiter with the
// code "closed" and refuses new acquires; Shutdown also waits for the
// sema-mux connections, which http.Server does not know.
//
// # Bounds
//
// Waiting acquires are bounded overall and per principal (a token, or the
// client's address without tokens), sema-mux connections per principal
// (limits.go); the excess is refused with too_many_waiters or
// too_many_connections (HTTP 429). A sema-mux connection never makes
// another connection wait: answers are written by the connection's own
// writer, and a client that stops reading is closed after the write
// timeout (muxwrite.go). Once a crowd of waiters has left, the memory it
// took is given back to the system.
//
// # Security
//
// Tokens come with a role: client (acquire, renew, release, describe,
// guarantees) or admin (also list, force-release, and any lease). They are
// looked up by SHA-256, so lookups leak nothing about a token's bytes. A
// lease is bound to the token that acquired it, by a fingerprint of the
// token (never the token itself) that the embedded store journals with
// the lease, so the binding survives restarts; to another client token
// the lease is unknown (renew: lease_lost, release: not_held). Holder lease IDs are shown to admins only. Without tokens everyone
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
