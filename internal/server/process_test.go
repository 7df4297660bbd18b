package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/testenv"
	"github.com/sema-dev/sema/internal/wire"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// call posts (or gets, with a nil body) and decodes the envelope.
func call(c *http.Client, method, url string, body any) (int, wire.Envelope, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, wire.Envelope{}, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, wire.Envelope{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, wire.Envelope{}, err
	}
	var env wire.Envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return resp.StatusCode, env, fmt.Errorf("decode %q: %w", raw, err)
	}
	return resp.StatusCode, env, nil
}

func getStatus(c *http.Client, url, name string) (sema.Status, error) {
	var st sema.Status
	resp, err := c.Get(url + wire.PathLock + name)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return st, fmt.Errorf("describe: %s", resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

func TestKill9KeepsLeases(t *testing.T) {
	p := testenv.StartSema(t, testenv.SemaOptions{})
	c := &http.Client{Timeout: testenv.HangGuard}
	acq := func(p *testenv.Sema, id string) (int, wire.Envelope) {
		t.Helper()
		st, env, err := call(c, "POST", p.URL+wire.PathAcquire, wire.AcquireRequest{Name: "k9", Limit: 2, ID: id, TTLMillis: 30000})
		if err != nil {
			t.Fatal(err)
		}
		return st, env
	}
	_, a := acq(p, "lease-a")
	_, b := acq(p, "lease-b")
	if a.Lease == nil || b.Lease == nil {
		t.Fatalf("acquire: %+v %+v", a, b)
	}
	// Churn on another name pushes the token counter up.
	var top uint64
	for i := range 20 {
		_, env, err := call(c, "POST", p.URL+wire.PathAcquire, wire.AcquireRequest{Name: "churn", ID: fmt.Sprint("c", i)})
		if err != nil || env.Lease == nil {
			t.Fatal(err, env.Error)
		}
		top = env.Lease.Token
		call(c, "POST", p.URL+wire.PathRelease, wire.ReleaseRequest{Name: "churn", ID: env.Lease.ID})
	}
	p.Restart(t, true)
	status, err := getStatus(c, p.URL, "k9")
	if err != nil || status.Used != 2 || len(status.Holders) != 2 ||
		status.Holders[0].Token != a.Lease.Token || status.Holders[1].Token != b.Lease.Token {
		t.Fatalf("after kill -9: %+v, %v", status, err)
	}
	if code, env := acq(p, "lease-c"); code != 409 || env.Error == nil || env.Error.Code != wire.CodeNotAcquired {
		t.Fatalf("a third holder after restart: %d %+v", code, env)
	}
	if code, env, _ := call(c, "POST", p.URL+wire.PathRenew, wire.RenewRequest{Name: "k9", ID: "lease-a", TTLMillis: 30000}); code != 200 || env.Lease.Token != a.Lease.Token {
		t.Fatalf("renew after restart: %d %+v", code, env)
	}
	if code, env, _ := call(c, "POST", p.URL+wire.PathRelease, wire.ReleaseRequest{Name: "k9", ID: "lease-b"}); code != 200 {
		t.Fatalf("release after restart: %d %+v", code, env)
	}
	_, d := acq(p, "lease-d")
	if d.Lease == nil || d.Lease.Token <= top {
		t.Fatalf("after restart: %+v; want a token above %d", d, top)
	}
	// A clean stop keeps them too.
	p.Restart(t, false)
	if code, env := acq(p, "lease-e"); code != 409 {
		t.Fatalf("after SIGTERM and restart, a third holder: %d %+v", code, env)
	}
	if code, _, _ := call(c, "POST", p.URL+wire.PathRelease, wire.ReleaseRequest{Name: "k9", ID: "lease-d"}); code != 200 {
		t.Fatalf("release after clean restart: %d", code)
	}
	p.Shutdown(t)
}
