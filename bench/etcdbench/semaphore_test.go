package etcdbench

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"
)

// The semaphore benchmark's workload.
const (
	permits = 3
	workers = 50
	tasks   = 20 // per worker
	work    = 2 * time.Millisecond
)

// ideal is the time the workload takes with 3 permits always busy.
var ideal = time.Duration(workers*tasks) * work / permits

// BenchmarkSemaphore3 runs the workload once per iteration, its 50
// workers goroutines of this process sharing one connection: sema's
// semaphore against the recipe etcd users write for lack of one, a mutex
// per permit ("slots"): try each slot, else wait on one in turn. Beside
// them, "etcd-writes-only" shows what sema's writes alone cost on the same
// etcd (see writesOnly); it runs first when the mutex does, else last.
func BenchmarkSemaphore3(b *testing.B) {
	withFloor(b, writesOnly, func() { semaphorePair(b) })
}

// semaphorePair runs sema's semaphore and the mutex per slot, in pair's order.
func semaphorePair(b *testing.B) {
	pair(b, "etcd-mutex-slots", func(b *testing.B) {
		id := runID()
		// Each worker has a session of its own and a mutex on each slot.
		slots := make([][]*concurrency.Mutex, permits)
		for s := range slots {
			slots[s] = newSharedMutexes(b, workers, fmt.Sprintf("/mutex/sem3/%s/slot%d", id, s))
		}
		var turn atomic.Int64
		runTasks(b, func(w int) (func() error, error) {
			for s := range permits {
				m := slots[s][w]
				if err := m.TryLock(bg); err == nil {
					return func() error { return m.Unlock(bg) }, nil
				} else if err != concurrency.ErrLocked {
					return nil, err
				}
			}
			return lock(slots[turn.Add(1)%permits][w])
		})
	}, func(b *testing.B) {
		s := newSema(b, 1)[0].Semaphore("sem3/"+runID(), permits)
		runTasks(b, func(int) (func() error, error) { return acquire(s) })
	})
}

// writesOnly runs the workload on a semaphore of this process (a buffered
// channel) that makes only the two etcd writes a waiting task of sema's
// semaphore makes: a put as it queues, and a delete when it gives its
// permit back, before the next task may start. Nothing is read, watched or
// checked: it is the cost of those writes alone.
func writesOnly(b *testing.B) {
	cli := newEtcdClient(b)
	pfx := "/writes/sem3/" + runID() + "/"
	permitsFree := make(chan struct{}, permits)
	runTasks(b, func(w int) (func() error, error) {
		key := pfx + strconv.Itoa(w)
		if _, err := cli.Put(bg, key, "queued"); err != nil {
			return nil, err
		}
		permitsFree <- struct{}{}
		return func() error {
			_, err := cli.Delete(bg, key)
			<-permitsFree
			return err
		}, nil
	})
}

// runTasks runs the workload b.N times with acquire, checking that no more
// than permits tasks ever run at once, and reports the time per run and
// its ratio to the ideal.
func runTasks(b *testing.B, acquire func(worker int) (release func() error, err error)) {
	warmUp(b, workers, acquire)
	var running, peak atomic.Int64
	var total time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		done := make(chan error, workers)
		for w := range workers {
			go func() {
				for range tasks {
					release, err := acquire(w)
					if err != nil {
						done <- err
						return
					}
					n := running.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					time.Sleep(work)
					running.Add(-1)
					if err := release(); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
		}
		for range workers {
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
		total += time.Since(start)
	}
	b.StopTimer()
	if p := peak.Load(); p > permits {
		b.Fatalf("%d tasks ran at once, more than %d permits", p, permits)
	}
	per := total / time.Duration(b.N)
	b.ReportMetric(float64(per.Milliseconds()), "ms/run")
	b.ReportMetric(float64(per)/float64(ideal), "x-ideal")
	b.ReportMetric(float64(peak.Load()), "max-running")
}
