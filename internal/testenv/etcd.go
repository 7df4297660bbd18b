package testenv

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Etcd is one etcd member on 127.0.0.1.
type Etcd struct {
	*Proc
	ClientAddr string // 127.0.0.1:port of the client API
	PeerAddr   string
	name       string
	tls        *tls.Config // set when it serves clients over TLS only
}

// EtcdCluster is an etcd cluster of one or more members on 127.0.0.1.
type EtcdCluster struct {
	Members []*Etcd
}

// Endpoints returns the members' client addresses (host:port).
func (c *EtcdCluster) Endpoints() []string {
	e := make([]string, len(c.Members))
	for i, m := range c.Members {
		e[i] = m.ClientAddr
	}
	return e
}

// URL returns an etcd:// URL naming every member, with no key prefix.
func (c *EtcdCluster) URL() string { return "etcd://" + strings.Join(c.Endpoints(), ",") }

// StartEtcd starts a cluster of n members (1 or 3, say) of its own for the
// calling test; it is stopped when the test ends.
func StartEtcd(tb testing.TB, n int) *EtcdCluster {
	tb.Helper()
	c := startEtcd(tb, n, nil)
	tb.Cleanup(c.stop)
	return c
}

// StartEtcdTLS starts one member of its own for the calling test that
// serves clients over TLS only, with the certificate in f; with
// clientCerts it also asks every client for a certificate that f's
// certificate signed. It is stopped when the test ends.
func StartEtcdTLS(tb testing.TB, f TLSFiles, clientCerts bool) *EtcdCluster {
	tb.Helper()
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		tb.Fatal(err)
	}
	args := []string{"--cert-file", f.Cert, "--key-file", f.Key}
	if clientCerts {
		args = append(args, "--client-cert-auth", "--trusted-ca-file", f.Cert)
	}
	c := startEtcd(tb, 1, &tls.Config{RootCAs: f.Pool, Certificates: []tls.Certificate{cert}}, args...)
	tb.Cleanup(c.stop)
	return c
}

// startEtcd starts n members; with tc set, each serves clients over TLS
// only, started with the extra arguments.
func startEtcd(tb testing.TB, n int, tc *tls.Config, extra ...string) *EtcdCluster {
	tb.Helper()
	scheme := "http://"
	if tc != nil {
		scheme = "https://"
	}
	bin := lookBin(tb, "etcd", "etcd-server")
	c := &EtcdCluster{}
	var initial []string
	for i := range n {
		cp, err1 := freePort(false)
		pp, err2 := freePort(false)
		if err1 != nil || err2 != nil || cp == pp {
			tb.Fatalf("testenv: no free ports for etcd")
		}
		m := &Etcd{ClientAddr: "127.0.0.1:" + strconv.Itoa(cp), PeerAddr: "127.0.0.1:" + strconv.Itoa(pp),
			name: "m" + strconv.Itoa(i), tls: tc}
		initial = append(initial, m.name+"=http://"+m.PeerAddr)
		c.Members = append(c.Members, m)
	}
	token := "sema-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, m := range c.Members {
		dir := tempDir(tb, "etcd")
		args := []string{"--name", m.name, "--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", scheme + m.ClientAddr, "--advertise-client-urls", scheme + m.ClientAddr,
			"--listen-peer-urls", "http://" + m.PeerAddr, "--initial-advertise-peer-urls", "http://" + m.PeerAddr,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", token, "--heartbeat-interval", "50", "--election-timeout", "500",
			"--logger", "zap", "--log-outputs", "stderr"}
		args = append(args, extra...)
		m.Proc = newProc("etcd "+m.name+" "+m.ClientAddr, dir, bin, args)
		if err := m.Start(); err != nil {
			c.stop()
			tb.Fatal(err)
		}
	}
	for _, m := range c.Members {
		if err := m.waitReady(m.healthErr); err != nil {
			c.stop()
			tb.Fatal(err)
		}
	}
	return c
}

func (c *EtcdCluster) stop() {
	for _, m := range c.Members {
		if m.Proc != nil {
			m.Stop(0)
			removeAll(m.Dir)
		}
	}
}

// healthErr asks the member's /health endpoint (healthy once it has a
// leader and serves reads).
func (m *Etcd) healthErr() error {
	resp, err := m.httpClient().Get(m.clientURL() + "/health")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var h struct {
		Health string `json:"health"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return err
	}
	if h.Health != "true" {
		return fmt.Errorf("health %q", h.Health)
	}
	return nil
}

// Restart starts a stopped or killed member again with its data, waiting
// until it is healthy.
func (m *Etcd) Restart(tb testing.TB) {
	tb.Helper()
	if m.Running() {
		m.Stop(0)
	}
	if err := m.Start(); err != nil {
		tb.Fatal(err)
	}
	if err := m.waitReady(m.healthErr); err != nil {
		tb.Fatal(err)
	}
}

// Leader returns the index of the member that is the leader now, asking
// the running members; -1 if none knows one.
func (c *EtcdCluster) Leader() int {
	ids := map[uint64]int{}
	var leader uint64
	for i, m := range c.Members {
		if !m.Running() {
			continue
		}
		st, err := m.status()
		if err != nil {
			continue
		}
		ids[st.Header.MemberID] = i
		if st.Leader != 0 {
			leader = st.Leader
		}
	}
	if i, ok := ids[leader]; ok {
		return i
	}
	return -1
}

type etcdStatus struct {
	Header struct {
		MemberID uint64 `json:"member_id,string"`
	} `json:"header"`
	Leader uint64 `json:"leader,string"`
}

// status calls the maintenance Status RPC through etcd's JSON gateway.
func (m *Etcd) status() (etcdStatus, error) {
	var st etcdStatus
	resp, err := m.httpClient().Post(m.clientURL()+"/v3/maintenance/status", "application/json", bytes.NewReader([]byte("{}")))
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

// clientURL is the base URL of the member's client API.
func (m *Etcd) clientURL() string {
	if m.tls != nil {
		return "https://" + m.ClientAddr
	}
	return "http://" + m.ClientAddr
}

// httpClient talks to the member's client API, over TLS if it serves that.
func (m *Etcd) httpClient() *http.Client {
	return &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: m.tls, DisableKeepAlives: true}}
}
