package redisbench

import (
	"fmt"
	"github.com/sema-dev/sema/bench/internal/drive"
	"testing"

	"github.com/go-redsync/redsync/v4"

	"github.com/sema-dev/sema"
)

// BenchmarkDistinct: 64 goroutines of one process, one client per system
// (a pool of 64 connections), each goroutine acquiring and releasing a
// lock of its own: b.N pairs in all.
func BenchmarkDistinct(b *testing.B) {
	pairs := func(b *testing.B, op func(w int) error) {
		cpu := startCPU(b)
		elapsed := drive.Run(b, contenders, op)
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pairs/s")
		cpu.report(b)
	}
	compare(b,
		system{"sema", func(b *testing.B) {
			c := newSema(b, contenders)
			mus := make([]*sema.Semaphore, contenders)
			for i := range mus {
				mus[i] = c.Mutex(fmt.Sprintf("bench/distinct/%d", i), sema.WithTTL(ttl))
			}
			pairs(b, func(w int) error {
				l, err := mus[w].Acquire(bg)
				if err != nil {
					return err
				}
				return l.Release(bg)
			})
		}},
		system{"redislock", func(b *testing.B) {
			locker := newRedislock(b, contenders)
			pairs(b, func(w int) error {
				l, err := locker.Obtain(bg, fmt.Sprintf("bench:distinct:%d", w), ttl, nil)
				if err != nil {
					return err
				}
				return l.Release(bg)
			})
		}},
		system{"redsync", func(b *testing.B) {
			rs := newRedsync(b, contenders)
			mus := make([]*redsync.Mutex, contenders)
			for i := range mus {
				mus[i] = redsyncMutex(rs, fmt.Sprintf("bench:distinct:redsync:%d", i))
			}
			pairs(b, func(w int) error {
				if err := mus[w].LockContext(bg); err != nil {
					return err
				}
				_, err := mus[w].UnlockContext(bg)
				return err
			})
		}},
	)
}
