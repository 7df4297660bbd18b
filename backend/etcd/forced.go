package etcd

import (
	"encoding/json"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/internal/forced"
)

// NotifyForced makes the backend call f for each lease force-released on
// the cluster, by any client, so that a holder of this backend learns at
// once rather than at its next renewal (sema.ForceNotifier); a client
// ignores the leases it does not hold. The backend's anchor watch (see
// anchor) reads the marks of force-released leases.
func (b *Backend) NotifyForced(f func(sema.ForceNotice)) (stop func()) { return b.notices.Add(f) }

// heardForced tells the registered clients of the force-release marks put.
func (b *Backend) heardForced(evs []*clientv3.Event) {
	for _, ev := range evs {
		id := strings.TrimPrefix(string(ev.Kv.Key), b.k.forced)
		var m forced.Message
		if json.Unmarshal(ev.Kv.Value, &m) != nil {
			m = forced.Message{Name: string(ev.Kv.Value)} // a mark of an older sema: the name
		}
		b.notices.Tell(m.Name, []string{id}, m.By)
	}
}
