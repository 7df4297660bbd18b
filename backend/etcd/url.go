package etcd

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sema-dev/sema"
)

// DefaultPort is the port of an endpoint given without one.
const DefaultPort = "2379"

// tlsFiles names the PEM files of an etcds:// URL.
type tlsFiles struct{ ca, cert, key string }

// ParseURL reads a backend URL:
//
//	etcd://[user[:password]@]host[:port][,host[:port]...][/prefix][?options]
//	etcds://…   the same over TLS
//
// The hosts are the cluster's client endpoints (port 2379 if omitted;
// IPv6 in brackets). The path is the key prefix (default "sema"). Options:
//
//	dial-timeout=5s  request-timeout=5s  waiter-ttl=15s  recheck=2s
//	cacert=FILE      the CA bundle that signs the server (etcds://; default:
//	                 the system's roots)
//	cert=FILE&key=FILE  a client certificate (etcds://)
//
// The user and password authenticate to an etcd with auth enabled; write
// a password's reserved characters percent-encoded.
func ParseURL(raw string) (Config, error) {
	c, files, err := parseURL(raw)
	if err != nil {
		return Config{}, err
	}
	if c.TLS != nil {
		if err := files.load(c.TLS); err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

// parseURL parses raw without reading any file.
func parseURL(raw string) (Config, tlsFiles, error) {
	var c Config
	var files tlsFiles
	bad := func(format string, args ...any) (Config, tlsFiles, error) {
		return Config{}, tlsFiles{}, fmt.Errorf("etcd: %w: backend url %s: %s", sema.ErrInvalidArgument, Redact(raw), fmt.Sprintf(format, args...))
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	switch strings.ToLower(scheme) {
	case "etcd":
	case "etcds":
		c.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	default:
		if !ok {
			return bad("not an etcd:// url")
		}
		return bad("scheme %q is not etcd or etcds", scheme)
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		user, err := url.Parse("x://" + authority[:at+1] + "h")
		if err != nil || user.User == nil {
			return bad("bad user:password (percent-encode reserved characters)")
		}
		c.Username = user.User.Username()
		c.Password, _ = user.User.Password()
		if c.Username == "" {
			return bad("empty user name")
		}
		authority = authority[at+1:]
	}
	for _, h := range strings.Split(authority, ",") {
		ep, err := endpoint(h)
		if err != nil {
			return bad("%v", err)
		}
		c.Endpoints = append(c.Endpoints, ep)
	}
	u, err := url.Parse(tail)
	if err != nil {
		return bad("bad path or query")
	}
	if u.Fragment != "" || u.Scheme != "" || u.Host != "" || u.Opaque != "" {
		return bad("unexpected %q", tail)
	}
	c.Prefix = strings.TrimPrefix(u.Path, "/")
	if c.Prefix != "" {
		if err := checkPrefix(c.Prefix); err != nil {
			return Config{}, tlsFiles{}, err
		}
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return bad("bad query")
	}
	for k, vs := range q {
		if len(vs) != 1 {
			return bad("option %q given %d times", k, len(vs))
		}
		v := vs[0]
		var d *time.Duration
		switch k {
		case "dial-timeout":
			d = &c.DialTimeout
		case "request-timeout":
			d = &c.RequestTimeout
		case "waiter-ttl":
			d = &c.WaiterTTL
		case "recheck":
			d = &c.Recheck
		case "cacert":
			files.ca = v
		case "cert":
			files.cert = v
		case "key":
			files.key = v
		default:
			return bad("unknown option %q (known: dial-timeout, request-timeout, waiter-ttl, recheck, cacert, cert, key)", k)
		}
		if d != nil {
			if *d, err = time.ParseDuration(v); err != nil || *d <= 0 {
				return bad("option %s=%q is not a positive duration", k, v)
			}
		}
	}
	if c.TLS == nil && files != (tlsFiles{}) {
		return bad("cacert, cert and key need etcds://")
	}
	if (files.cert == "") != (files.key == "") {
		return bad("cert and key go together")
	}
	if err := c.Validate(); err != nil {
		return Config{}, tlsFiles{}, err
	}
	return c, files, nil
}

// endpoint checks one host[:port] of the URL and adds the default port.
func endpoint(h string) (string, error) {
	if h == "" {
		return "", fmt.Errorf("empty host")
	}
	if strings.ContainsAny(h, " %\\") {
		return "", fmt.Errorf("bad host %q", h)
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		// No port: a plain name or address, or an IPv6 address in brackets.
		host, port = h, DefaultPort
		if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
			host = h[1 : len(h)-1]
		}
		if strings.ContainsAny(host, "[]") || strings.Contains(host, ":") && net.ParseIP(host) == nil {
			return "", fmt.Errorf("bad host %q", h)
		}
	}
	if host == "" || strings.ContainsAny(host, "[]") {
		return "", fmt.Errorf("bad host %q", h)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 || strings.Trim(port, "0123456789") != "" {
		return "", fmt.Errorf("bad port %q", port)
	}
	return net.JoinHostPort(host, port), nil
}

// load reads the PEM files into t.
func (f tlsFiles) load(t *tls.Config) error {
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return fmt.Errorf("etcd: %w: cacert: %w", sema.ErrInvalidArgument, err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("etcd: %w: cacert %s holds no PEM certificate", sema.ErrInvalidArgument, f.ca)
		}
	}
	if f.cert != "" {
		cert, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return fmt.Errorf("etcd: %w: client certificate: %w", sema.ErrInvalidArgument, err)
		}
		t.Certificates = []tls.Certificate{cert}
	}
	return nil
}

// Redact hides the password of an etcd URL, for messages and logs.
func Redact(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "(not a url)"
	}
	end := len(rest)
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		end = i
	}
	at := strings.LastIndexByte(rest[:end], '@')
	if at < 0 {
		return raw
	}
	user, _, hasPw := strings.Cut(rest[:at], ":")
	if !hasPw {
		return raw
	}
	return scheme + "://" + user + ":xxxxx@" + rest[at+1:]
}
