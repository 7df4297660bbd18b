package etcdbench

import (
	"strconv"
	"testing"

	"github.com/sema-dev/sema/bench/internal/drive"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// withFloor runs both sides of a comparison (sides) and the floor beside
// them, as "etcd-writes-only": first when the mutex runs first, else last.
func withFloor(b *testing.B, floor func(*testing.B), sides func()) {
	if mutexFirst {
		b.Run("etcd-writes-only", floor)
	}
	sides()
	if !mutexFirst {
		b.Run("etcd-writes-only", floor)
	}
}

// hotWritesOnly runs the hot-name workload of n clients, a connection
// each, on a lock of this process (a channel of one) that makes only the
// two etcd writes every turn of a lock between processes makes on etcd: a
// put of the client's key as it queues, and a delete of it when it gives
// the lock back, before the next holder may start. Nothing is read,
// watched or checked, and the hand-off itself (a channel) costs nothing:
// it is what those writes alone allow on the same etcd.
func hotWritesOnly(b *testing.B, n int) {
	pfx := "/writes/hot/" + runID() + "/"
	clis := make([]*clientv3.Client, n)
	for w := range clis {
		clis[w] = newEtcdClient(b)
	}
	held := make(chan struct{}, 1)
	hot(b, n, func(w int) (func() error, error) {
		key := pfx + strconv.Itoa(w)
		if _, err := clis[w].Put(bg, key, "queued"); err != nil {
			return nil, err
		}
		held <- struct{}{}
		return func() error {
			_, err := clis[w].Delete(bg, key)
			<-held
			return err
		}, nil
	})
}

// pairWritesOnly is the least a turn on etcd costs one client: a put of
// its key and a delete of it, two requests and two raft writes, with
// nothing compared, read or watched. Every lock on etcd makes at least
// those two writes a turn (sema and the mutex do it in a Txn each).
func pairWritesOnly(b *testing.B) {
	cli := newEtcdClient(b)
	key := "/writes/u/" + runID()
	elapsed := drive.Run(b, 1, func(int) error {
		if _, err := cli.Put(bg, key, "held"); err != nil {
			return err
		}
		_, err := cli.Delete(bg, key)
		return err
	})
	b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N)/1e3, "ms/pair")
}
