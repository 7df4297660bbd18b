package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/server"
	"github.com/sema-dev/sema/internal/store"
)

// Defaults of sema serve.
const (
	defaultListen  = "127.0.0.1:7543"
	shutdownBudget = 30 * time.Second
)

func serveCommand() *command {
	c := &command{
		name:     "serve",
		summary:  "serve the HTTP/JSON API (embedded durable store, or --backend)",
		synopsis: "sema serve [--listen ADDR] [--data-dir DIR | --backend URL] [flags]",
		help:     serveHelp,
	}
	c.flags = func(fs *flag.FlagSet) { new(serveOptions).register(fs) }
	c.run = func(ctx context.Context, env *Env, args []string) int {
		var o serveOptions
		rest, code, done := c.parse(env, args, o.register)
		if done {
			return code
		}
		if len(rest) > 0 {
			fmt.Fprintf(env.Stderr, "sema serve: unexpected argument %q\n", rest[0])
			return ExitUsage
		}
		return runServe(ctx, env, &o)
	}
	return c
}

const serveHelp = `
Serves the HTTP/JSON API and the sema-mux protocol of the Go client over the
embedded durable store (in --data-dir), or over another backend (--backend:
redis://, postgres://, etcd://, file://, or mem:// — one memory shared by
every client of this server, lost when it stops, fencing tokens included).
It listens on loopback unless told otherwise, and needs --token-file beyond
it. Once started, it writes log records (logfmt) on standard error.
`

type serveOptions struct {
	listen, dataDir, backend   string
	tlsCert, tlsKey, tokenFile string
	heartbeat, maxWait         time.Duration
	snapshotBytes              int64
	procs                      int
	logLevel                   string
	maxWaiters, maxWaitersPer  int
	maxConnsPer                int
	acceptDataLoss             bool
}

// register defines sema serve's flags on fs.
func (o *serveOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.listen, "listen", defaultListen, "`address` to listen on; beyond loopback --token-file is required")
	fs.StringVar(&o.dataDir, "data-dir", "", "`directory` of the embedded store (default $XDG_STATE_HOME/sema/server or ~/.local/state/sema/server)")
	fs.StringVar(&o.backend, "backend", "", "serve this backend `URL` instead of the embedded store (no state of its own)")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "TLS certificate `file` (PEM); with --tls-key, serve HTTPS")
	fs.StringVar(&o.tlsKey, "tls-key", "", "TLS private key `file` (PEM)")
	fs.StringVar(&o.tokenFile, "token-file", "", "`file` of accepted bearer tokens, one \"client|admin TOKEN\" per line")
	durationVar(fs, &o.heartbeat, "heartbeat", server.DefaultHeartbeat, "long-poll heartbeat `interval` (seconds or a duration)")
	durationVar(fs, &o.maxWait, "max-wait", server.DefaultMaxWait, "cap on an acquire's wait_ms (`SECONDS` or a duration)")
	fs.Int64Var(&o.snapshotBytes, "snapshot-bytes", store.DefaultSnapshotBytes, "log growth (`bytes`) after which the embedded store snapshots and truncates its log")
	fs.IntVar(&o.maxWaiters, "max-waiters", server.DefaultMaxWaiters, "waiting acquires the server keeps at once; more are refused (too_many_waiters)")
	fs.IntVar(&o.maxWaitersPer, "max-waiters-per-client", server.DefaultMaxWaitersPerPrincipal, "waiting acquires one client (token, or address without tokens) may have at once")
	fs.IntVar(&o.maxConnsPer, "max-mux-conns-per-client", server.DefaultMaxConnsPerPrincipal, "sema-mux connections one client may hold open")
	fs.BoolVar(&o.acceptDataLoss, "accept-data-loss", false, "start even if the embedded store's log lost records (it ends below its last token reservation)")
	fs.IntVar(&o.procs, "procs", 0, "`CPUs` that run the server's Go code at once (GOMAXPROCS); 0: $GOMAXPROCS if set, else half the CPUs, at least 1")
	fs.StringVar(&o.logLevel, "log-level", "info", "`level` of the log: debug, info, warn or error")
}

// runServe runs the server until ctx ends. A bad command line is reported
// as a line "sema serve: …"; once the log exists, errors are log records.
func runServe(ctx context.Context, env *Env, o *serveOptions) int {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		fmt.Fprintf(env.Stderr, "sema serve: --log-level %q: want debug, info, warn or error\n", o.logLevel)
		return ExitUsage
	}
	logger := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level}))
	routeRedisLog(logger)
	if err := serve(ctx, env, o, logger); err != nil {
		if errors.Is(err, errUsage) {
			fmt.Fprintf(env.Stderr, "sema serve: %s\n", errMessage(err))
		} else {
			logger.Error("sema serve: " + errMessage(err))
		}
		return exitCodeFor(err)
	}
	return ExitOK
}

func serve(ctx context.Context, env *Env, o *serveOptions, logger *slog.Logger) error {

	var tokens []server.Token
	if o.tokenFile != "" {
		var err error
		if tokens, err = server.LoadTokens(o.tokenFile); err != nil {
			return usageError("--token-file %s: %s", o.tokenFile, err)
		}
		if len(tokens) == 0 {
			return usageError("--token-file %s holds no token", o.tokenFile)
		}
	}
	if server.NeedsAuth(o.listen) && len(tokens) == 0 {
		return usageError("refusing to listen on %s (beyond loopback) without --token-file", o.listen)
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return usageError("--tls-cert and --tls-key go together")
	}
	var tlsConf *tls.Config
	if o.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			return usageError("TLS: %v", err)
		}
		tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if o.snapshotBytes < 4096 {
		return usageError("--snapshot-bytes must be at least 4096")
	}
	if o.backend != "" && o.dataDir != "" {
		return usageError("--data-dir and --backend exclude each other")
	}
	if o.procs < 0 {
		return usageError("--procs must be at least 0")
	}
	if o.maxWaiters < 1 || o.maxWaitersPer < 1 || o.maxConnsPer < 1 {
		return usageError("--max-waiters, --max-waiters-per-client and --max-mux-conns-per-client must be at least 1")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(serveProcs(env, o.procs)))

	b, label, err := openServed(ctx, env, o, logger)
	if err != nil {
		return err
	}
	defer func() {
		if err := b.Close(); err != nil {
			logger.Error("sema serve: closing the store", "err", err)
		}
	}()
	srv, err := server.New(server.Config{Backend: b, Tokens: tokens, Heartbeat: o.heartbeat,
		MaxWait: o.maxWait, Logger: logger, MaxWaiters: o.maxWaiters,
		MaxWaitersPerPrincipal: min(o.maxWaitersPer, o.maxWaiters), MaxConnsPerPrincipal: o.maxConnsPer})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen: %w: %w", sema.ErrUnavailable, err)
	}
	hs := &http.Server{
		Handler:           srv,
		TLSConfig:         tlsConf,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second, // long-polls extend their own deadlines
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          log.New(&slogWriter{logger}, "", 0),
		Protocols:         new(http.Protocols),
	}
	// HTTP/1.1, HTTP/2 over TLS, and h2c (HTTP/2 by prior knowledge).
	hs.Protocols.SetHTTP1(true)
	hs.Protocols.SetHTTP2(true)
	hs.Protocols.SetUnencryptedHTTP2(true)
	hs.RegisterOnShutdown(srv.Close)
	scheme := "http"
	if tlsConf != nil {
		scheme = "https"
		ln = tls.NewListener(ln, tlsConf)
	}
	logger.Info("sema serve: listening", "addr", ln.Addr().String(), "url", scheme+"://"+ln.Addr().String(),
		"auth", len(tokens) > 0, "store", label, "procs", runtime.GOMAXPROCS(0))
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w: %w", sema.ErrUnavailable, err)
	case <-ctx.Done():
	}
	logger.Info("sema serve: shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownBudget)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		logger.Warn("sema serve: connections still open at shutdown", "err", err)
		hs.Close()
	}
	// The sema-mux connections: hs.Shutdown does not know them. Wait for
	// their last answers before the backend closes.
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("sema serve: sema-mux connections still open at shutdown", "err", err)
	}
	return nil
}

// serveProcs is the GOMAXPROCS sema serve runs with: --procs, else
// $GOMAXPROCS if set, else half of the runtime's default (the CPUs this
// process may use), at least 1.
//
// Why not all of them: every grant is serialized on the store's lock, and
// most of a request's cost is the kernel's (loopback TCP, fsync). A second
// P then mostly spins looking for work and wakes threads, on CPUs that a
// server usually shares with its clients or other services. Hosts with more
// CPUs were not measured.
func serveProcs(env *Env, procs int) int {
	switch {
	case procs > 0:
		return procs
	case env.Getenv("GOMAXPROCS") != "":
		return runtime.GOMAXPROCS(0)
	}
	return max(1, runtime.GOMAXPROCS(0)/2)
}

// openServed opens the backend to serve, the embedded store or --backend,
// and says which for the log.
func openServed(ctx context.Context, env *Env, o *serveOptions, logger *slog.Logger) (sema.Backend, string, error) {
	if o.backend != "" {
		label := sema.Redact(o.backend)
		b, err := sema.OpenEnv(ctx, o.backend, sema.WithBackendLogger(logger))
		if err != nil {
			return nil, "", fmt.Errorf("--backend: %w", err)
		}
		if d, ok := b.(sema.Declarer); ok && !d.Guarantees().DurableFencing {
			logger.Warn("sema serve: the backend may lose its state and fencing tokens when it restarts", "backend", label,
				"guarantees", d.Guarantees().Notes)
		}
		return b, label, nil
	}
	dir := o.dataDir
	if dir == "" {
		var err error
		if dir, err = defaultDataDir(env); err != nil {
			return nil, "", err
		}
	}
	st, err := store.Open(store.Config{Dir: dir, Logger: logger, SnapshotBytes: o.snapshotBytes,
		AcceptDataLoss: o.acceptDataLoss})
	return st, dir, err
}

// defaultDataDir is $XDG_STATE_HOME/sema/server, else
// ~/.local/state/sema/server.
func defaultDataDir(env *Env) (string, error) {
	if d := env.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "sema", "server"), nil
	}
	home := env.Getenv("HOME")
	if home == "" {
		return "", usageError("no $HOME or $XDG_STATE_HOME: give --data-dir")
	}
	return filepath.Join(home, ".local", "state", "sema", "server"), nil
}

// slogWriter sends net/http's own log lines (TLS handshake errors and the
// like) to slog at debug level.
type slogWriter struct{ l *slog.Logger }

func (w *slogWriter) Write(p []byte) (int, error) {
	w.l.Debug("sema serve: http", "msg", strings.TrimSpace(string(p)))
	return len(p), nil
}
