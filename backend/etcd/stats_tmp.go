package etcd

import "sync/atomic"

var Stat struct{ Txn, Read, KA, Watch, Verify, ReadTotal atomic.Int64 }
