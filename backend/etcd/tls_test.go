package etcd_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/etcd"
	"github.com/sema-dev/sema/internal/testenv"
)

// An etcd that serves clients over TLS and asks them for a certificate:
// the URL with the CA, the certificate and the key works; each missing or
// wrong setting fails Open with an error that names it.
func TestTLS(t *testing.T) {
	f := testenv.SelfSignedCert(t, t.TempDir())
	addr := testenv.StartEtcdTLS(t, f, true).Endpoints()[0]
	ca := "cacert=" + url.QueryEscape(f.Cert)
	mine := ca + "&cert=" + url.QueryEscape(f.Cert) + "&key=" + url.QueryEscape(f.Key)
	ctx := context.Background()

	b, err := etcd.OpenURL(ctx, "etcds://"+addr+"/tls?"+mine)
	if err != nil {
		t.Fatalf("Open with the CA, a certificate and its key: %v", err)
	}
	c := sema.New(b)
	defer c.Close()
	l, err := c.Mutex("tls/job").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := c.Mutex("tls/job").Describe(ctx); err != nil || len(st.Holders) != 1 {
		t.Fatalf("Describe: %+v, %v; want one holder", st, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	plain := testenv.SharedEtcd(t).Endpoints()[0]
	for _, tc := range []struct {
		url  string
		want error
		says string
	}{
		// Refused during the handshake (ErrPermission) or, with TLS 1.3,
		// by closing the connection after it.
		{"etcds://" + addr + "/tls?" + ca, nil, "the server wants a client certificate"},
		{"etcds://" + addr + "/tls", sema.ErrUnavailable, "cacert= names the CA"},
		{"etcd://" + addr + "/tls", sema.ErrUnavailable, "if the server wants TLS: etcds://"},
		{"etcds://" + plain + "/tls?" + mine, sema.ErrUnavailable, "if the server has no TLS: etcd://"},
	} {
		b, err := etcd.OpenURL(ctx, tc.url+sep(tc.url)+"dial-timeout=1s")
		if err == nil {
			b.Close()
		}
		kind := errors.Is(err, tc.want) || tc.want == nil && (errors.Is(err, sema.ErrPermission) || errors.Is(err, sema.ErrUnavailable))
		if err == nil || !kind || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Open %s: %v; want %v saying %q", tc.url, err, tc.want, tc.says)
		}
	}
}

// sep is what appends a query parameter to u.
func sep(u string) string {
	if strings.Contains(u, "?") {
		return "&"
	}
	return "?"
}
