package pgbench

import (
	"fmt"
	"github.com/sema-dev/sema/bench/internal/drive"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkUncontended: one client, one lock, acquire and release in a
// loop. ns/op is one pair. After the systems, "lease-row-only" is a floor
// under sema's pair (see leaseRowOnly).
func BenchmarkUncontended(b *testing.B) {
	for _, s := range systems {
		if s.name == "sema-8" {
			continue
		}
		b.Run(s.name, func(b *testing.B) {
			ls, _ := s.make(b, 1)
			name := "bench/solo/" + runID()
			elapsed := drive.Run(b, 1, func(int) error { return pair(ls[0], name) })
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pairs/s")
		})
	}
	b.Run("lease-row-only", leaseRowOnly)
}

// pair takes the lock name and gives it back at once.
func pair(l locker, name string) error {
	if err := l.lock(bg, name); err != nil {
		return err
	}
	return l.unlock(bg, name)
}

// hotWarmUp is the number of turns on the hot lock before the recorded
// ones: two for each contender.
const hotWarmUp = 2 * contenders

// BenchmarkHotName: 64 contenders take turns on one lock; the metrics are
// those of the turns after the first hotWarmUp (b.N counts them all).
func BenchmarkHotName(b *testing.B) {
	for _, s := range systems {
		b.Run(s.name, func(b *testing.B) {
			before := deadlocks(b)
			ls, done := s.make(b, contenders)
			name := "bench/hot/" + runID()
			t := newTurns(hotWarmUp)
			drive.Run(b, contenders, func(w int) error {
				start := time.Now()
				if err := ls[w].lock(bg, name); err != nil {
					return err
				}
				t.got(w, time.Since(start))
				return ls[w].unlock(bg, name)
			})
			t.report(b, time.Now())
			done(b)
			reportDeadlocks(b, before)
		})
	}
}

// BenchmarkManyNames: 64 contenders each take one of 1,000 locks at random,
// after one untimed turn each.
func BenchmarkManyNames(b *testing.B) {
	const names = 1000
	for _, s := range systems {
		b.Run(s.name, func(b *testing.B) {
			before := deadlocks(b)
			ls, done := s.make(b, contenders)
			base := "bench/many/" + runID() + "/"
			drive.WarmUp(b, contenders, func(w int) error { return pair(ls[w], base+fmt.Sprint(rand.IntN(names))) })
			elapsed := drive.Run(b, contenders, func(w int) error {
				return pair(ls[w], base+fmt.Sprint(rand.IntN(names)))
			})
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pairs/s")
			done(b)
			reportDeadlocks(b, before)
		})
	}
}
