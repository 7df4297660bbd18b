package etcd

import (
	"context"
	"errors"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// keeper sends keepalives on one long-lived LeaseKeepAlive stream of the
// backend's connection. etcd answers the keepalives of a stream one at a
// time, in order, so each answer goes to the oldest caller still waiting.
// (clientv3's KeepAliveOnce opens a stream per keepalive, which costs more
// than the keepalive; its KeepAlive sends on a schedule of its own.) A
// broken stream fails its callers and the next call opens another.
type keeper struct {
	cli     *clientv3.Client
	mu      sync.Mutex
	stream  pb.Lease_LeaseKeepAliveClient
	cancel  context.CancelFunc
	pending []keepCall
	closed  bool
}

type keepCall struct {
	id clientv3.LeaseID
	ch chan<- keepResult
}

type keepResult struct {
	ttl int64
	err error
}

var errKeeperClosed = errors.New("keepalive stream closed")

// keepAlive renews etcd lease id and returns the TTL it was reset to (0 if
// etcd no longer has it).
func (k *keeper) keepAlive(ctx context.Context, id clientv3.LeaseID) (int64, error) {
	return k.send(id).wait(ctx)
}

// keeping is a keepalive sent, whose answer is awaited with wait.
type keeping <-chan keepResult

// send sends a keepalive for lease id without waiting for its answer.
func (k *keeper) send(id clientv3.LeaseID) keeping {
	ch := make(chan keepResult, 1)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		ch <- keepResult{err: errKeeperClosed}
		return ch
	}
	if k.stream == nil {
		sctx, cancel := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
		s, err := clientv3.RetryLeaseClient(k.cli).LeaseKeepAlive(sctx)
		if err != nil {
			cancel()
			ch <- keepResult{err: err}
			return ch
		}
		k.stream, k.cancel = s, cancel
		go k.recv(s)
	}
	s := k.stream
	k.pending = append(k.pending, keepCall{id, ch})
	if err := s.Send(&pb.LeaseKeepAliveRequest{ID: int64(id)}); err != nil {
		k.broken(s, err)
	}
	return ch
}

// wait returns the answer of a keepalive: the TTL the lease was reset to.
func (ch keeping) wait(ctx context.Context) (int64, error) {
	select {
	case r := <-ch:
		return r.ttl, r.err
	case <-ctx.Done():
		return 0, ctx.Err() // the answer goes to ch, which nobody reads
	}
}

// recv hands the answers of stream s to their callers.
func (k *keeper) recv(s pb.Lease_LeaseKeepAliveClient) {
	for {
		resp, err := s.Recv()
		k.mu.Lock()
		if err == nil && (len(k.pending) == 0 || k.pending[0].id != clientv3.LeaseID(resp.ID)) {
			err = errors.New("keepalive answer out of order")
		}
		if err != nil || s != k.stream {
			k.broken(s, err)
			k.mu.Unlock()
			return
		}
		c := k.pending[0]
		k.pending = k.pending[1:]
		k.mu.Unlock()
		c.ch <- keepResult{ttl: resp.TTL}
	}
}

// broken ends stream s if it is the current one: its waiting callers get
// err. k.mu must be held.
func (k *keeper) broken(s pb.Lease_LeaseKeepAliveClient, err error) {
	if s != k.stream {
		return
	}
	if err == nil {
		err = errKeeperClosed
	}
	k.cancel()
	k.stream = nil
	for _, c := range k.pending {
		c.ch <- keepResult{err: err}
	}
	k.pending = nil
}

// close ends the stream for good.
func (k *keeper) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	if k.stream != nil {
		k.broken(k.stream, errKeeperClosed)
	}
}
