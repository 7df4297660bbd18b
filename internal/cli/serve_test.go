package cli

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for a server goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func serveEnv(vars map[string]string) (*Env, *syncBuffer) {
	errb := &syncBuffer{}
	return &Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: errb,
		Getenv: func(k string) string { return vars[k] }}, errb
}

func TestServeRefusesBadSetups(t *testing.T) {
	dir := t.TempDir()
	weak := filepath.Join(dir, "weak")
	os.WriteFile(weak, []byte("client short\n"), 0o600)
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("# nothing\n"), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "0.0.0.0:0"}, "without --token-file"},
		{[]string{"--listen", ":7543"}, "without --token-file"},
		{[]string{"--listen", "192.0.2.1:7543"}, "without --token-file"},
		{[]string{"--tls-cert", "x.pem"}, "go together"},
		{[]string{"--token-file", weak}, "line 1"},
		{[]string{"--token-file", empty}, "no token"},
		{[]string{"--token-file", filepath.Join(dir, "missing")}, "--token-file"},
		{[]string{"--data-dir", dir, "--backend", "mem://"}, "exclude each other"},
		{[]string{"--backend", "nope://x"}, "unknown scheme"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--procs", "-1"}, "--procs"},
		{[]string{"--procs", "two"}, "-procs"},
		{[]string{"extra"}, "unexpected argument"},
	} {
		env, errb := serveEnv(nil)
		code := Run(context.Background(), env, append([]string{"serve"}, c.args...))
		if code != ExitUsage || !strings.Contains(errb.String(), c.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want %d and %q", c.args, code, errb.String(), ExitUsage, c.want)
		}
	}
}

func TestServeProcs(t *testing.T) {
	n := runtime.GOMAXPROCS(0)
	for _, c := range []struct {
		vars  map[string]string
		procs int
		want  int
	}{
		{nil, 3, 3},
		{map[string]string{"GOMAXPROCS": "7"}, 3, 3},
		{map[string]string{"GOMAXPROCS": "7"}, 0, n}, // the runtime read it
		{nil, 0, max(1, n/2)},
	} {
		env, _ := serveEnv(c.vars)
		if got := serveProcs(env, c.procs); got != c.want {
			t.Errorf("env %v, --procs %d: %d; want %d", c.vars, c.procs, got, c.want)
		}
	}
}

func TestDefaultDataDir(t *testing.T) {
	for _, c := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"XDG_STATE_HOME": "/s", "HOME": "/h"}, "/s/sema/server"},
		{map[string]string{"XDG_STATE_HOME": "relative", "HOME": "/h"}, "/h/.local/state/sema/server"},
		{map[string]string{"HOME": "/h"}, "/h/.local/state/sema/server"},
	} {
		env, _ := serveEnv(c.vars)
		if got, err := defaultDataDir(env); err != nil || got != c.want {
			t.Errorf("%v: %q, %v; want %q", c.vars, got, err, c.want)
		}
	}
	env, _ := serveEnv(nil)
	if _, err := defaultDataDir(env); err == nil {
		t.Error("no HOME: no error")
	}
}

var addrRE = regexp.MustCompile(`addr=(\S+)`)

// TestServeRunsAndStops serves the embedded store in the default data dir
// (under a fake $XDG_STATE_HOME), answers, and exits 0 when its context
// ends (as on SIGINT/SIGTERM), leaving the store closed and reusable.
func TestServeRunsAndStops(t *testing.T) {
	state := t.TempDir()
	for round := range 2 {
		env, errb := serveEnv(map[string]string{"XDG_STATE_HOME": state})
		ctx, cancel := context.WithCancel(context.Background())
		exit := make(chan int, 1)
		go func() { exit <- Run(ctx, env, []string{"serve", "--listen", "127.0.0.1:0"}) }()
		var addr string
		for deadline := time.Now().Add(10 * time.Second); addr == ""; {
			if m := addrRE.FindStringSubmatch(errb.String()); m != nil {
				addr = m[1]
			} else if time.Now().After(deadline) {
				t.Fatalf("no listening line: %s", errb.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		resp, err := http.Post("http://"+addr+"/v1/acquire", "application/json",
			strings.NewReader(`{"name":"cli-test","ttl_ms":60000}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		wantStatus := 200
		if round == 1 {
			wantStatus = 409 // the lease of round 0 survived the restart
		}
		if resp.StatusCode != wantStatus {
			t.Fatalf("round %d: acquire %d %s", round, resp.StatusCode, body)
		}
		cancel()
		if code := <-exit; code != ExitOK {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		if fi, err := os.Stat(filepath.Join(state, "sema", "server")); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("data dir: %v %v", fi, err)
		}
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// the paths and a pool trusting it.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sema test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestServeTLSWithTokens serves HTTPS with a token file: plain HTTP and a
// missing token are refused, a client token works.
func TestServeTLSWithTokens(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(tokens, []byte("# role token\nclient client-token-0123456789\nadmin admin-token-0123456789\n"), 0o600)
	env, errb := serveEnv(nil)
	ctx, cancel := context.WithCancel(context.Background())
	exit := make(chan int, 1)
	go func() {
		exit <- Run(ctx, env, []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(),
			"--tls-cert", certFile, "--tls-key", keyFile, "--token-file", tokens})
	}()
	var addr string
	for deadline := time.Now().Add(10 * time.Second); addr == ""; time.Sleep(5 * time.Millisecond) {
		if m := addrRE.FindStringSubmatch(errb.String()); m != nil {
			addr = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no listening line: %s", errb.String())
		}
	}
	if !strings.Contains(errb.String(), "url=https://") {
		t.Errorf("log does not announce https: %s", errb.String())
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	do := func(token string) int {
		req, _ := http.NewRequest("POST", "https://"+addr+"/v1/acquire", strings.NewReader(`{"name":"tls"}`))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := do(""); code != 401 {
		t.Errorf("no token: %d, want 401", code)
	}
	if code := do("client-token-0123456789"); code != 200 {
		t.Errorf("client token: %d, want 200", code)
	}
	if resp, err := http.Post("http://"+addr+"/v1/acquire", "application/json", strings.NewReader(`{}`)); err == nil {
		if resp.StatusCode < 400 {
			t.Errorf("plain HTTP to the TLS port: %s", resp.Status)
		}
		resp.Body.Close()
	}
	cancel()
	if code := <-exit; code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}
