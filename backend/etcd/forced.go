package etcd

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/forced"
)

// NotifyForced makes the backend call f for each lease force-released on
// the cluster, by any client, so that a holder of this backend learns at
// once rather than at its next renewal (sema.ForceNotifier); a client
// ignores the leases it does not hold. The first call starts one watch, on
// the keys that mark force-released leases; it ends with the backend.
func (b *Backend) NotifyForced(f func(sema.ForceNotice)) (stop func()) {
	stop = b.notices.Add(f)
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.watchingForced && !b.isClosed() {
		b.watchingForced = true
		b.bg.Add(1)
		go b.watchForced()
	}
	return stop
}

// watchForced tells the registered clients of each force-release mark put,
// until the backend closes. A watch that ends (a leader lost, a member
// restarted) is made again after a second; marks put meanwhile are
// learned by their holders at their next renewal.
func (b *Backend) watchForced() {
	defer b.bg.Done()
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	defer cancel()
	go func() {
		<-b.closed
		cancel()
	}()
	for {
		for resp := range b.cli.Watch(ctx, b.k.forced, clientv3.WithPrefix(), clientv3.WithFilterDelete()) {
			for _, ev := range resp.Events {
				id := strings.TrimPrefix(string(ev.Kv.Key), b.k.forced)
				var m forced.Message
				if json.Unmarshal(ev.Kv.Value, &m) != nil {
					m = forced.Message{Name: string(ev.Kv.Value)} // a mark of an older sema: the name
				}
				b.notices.Tell(m.Name, []string{id}, m.By)
			}
		}
		select {
		case <-b.closed:
			return
		case <-time.After(time.Second):
		}
	}
}
