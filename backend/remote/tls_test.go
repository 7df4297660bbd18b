package remote_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/remote"
)

// TestHTTPS: the client speaks to a TLS server (sema-mux over TLS for the
// calls every lock takes, HTTP/2 for the rest), including a long poll that
// waits for a release.
func TestHTTPS(t *testing.T) {
	dir := t.TempDir()
	pool := writeCert(t, dir)
	srv := startServerTLS(t, filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), pool)
	b, err := remote.New(remote.Config{URL: "https://" + srv.addr, TLSConfig: &tls.Config{RootCAs: pool}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := func(id string) sema.Request {
		return sema.Request{Name: "tls", ID: id, Limit: 1, Weight: 1, TTL: 10 * time.Second}
	}
	h, err := b.TryAcquire(ctx, req("holder"))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, req("waiter"))
		got <- err
	}()
	waitFor(t, func() bool {
		st, err := b.Describe(ctx, "tls")
		return err == nil && len(st.Waiters) == 1
	})
	if err := b.Release(ctx, "tls", h.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter over https: %v", err)
	}
	if n := remote.MuxDialed(b); n != 1 {
		t.Fatalf("sema-mux connections over TLS: %d, want 1", n)
	}
	// Without the CA the server is not trusted: an error, not a grant.
	untrusted, _ := remote.New(remote.Config{URL: "https://" + srv.addr, RetryTimeout: -1})
	defer untrusted.Close()
	if _, err := untrusted.TryAcquire(ctx, req("x")); err == nil {
		t.Fatal("untrusted certificate accepted")
	}
}

// startServerTLS starts sema serve with a certificate and waits until it
// answers over TLS.
func startServerTLS(t *testing.T, cert, key string, pool *x509.CertPool) *server {
	t.Helper()
	s := &server{t: t, addr: freeAddr(t), dir: t.TempDir(), out: &syncBuffer{}, scheme: "https",
		tlsConf: &tls.Config{RootCAs: pool}}
	s.args = []string{"serve", "--listen", s.addr, "--data-dir", s.dir, "--tls-cert", cert, "--tls-key", key}
	s.start()
	t.Cleanup(func() { s.kill9() })
	return s
}

// writeCert writes a self-signed certificate for 127.0.0.1 and returns a
// pool trusting it.
func writeCert(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sema test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}
