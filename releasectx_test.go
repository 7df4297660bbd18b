package sema

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

type ctxKey struct{}

// The release context keeps the caller's values, not its cancellation, and
// is done at its deadline — whether or not anyone asked for Done before.
func TestReleaseCtx(t *testing.T) {
	for _, askDone := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			parent, cancel := context.WithCancel(context.WithValue(t.Context(), ctxKey{}, "v"))
			cancel() // the caller's context is over: the release goes on
			start := time.Now()
			r := newReleaseCtx(parent, start.Add(5*time.Second))
			defer r.stop()
			if dl, ok := r.Deadline(); !ok || !dl.Equal(start.Add(5*time.Second)) {
				t.Fatalf("Deadline = %v, %v; want %v", dl, ok, start.Add(5*time.Second))
			}
			if r.Value(ctxKey{}) != "v" {
				t.Fatalf("Value = %v, want the caller's", r.Value(ctxKey{}))
			}
			if askDone {
				select {
				case <-r.Done():
					t.Fatal("done before its deadline")
				default:
				}
			}
			if err := r.Err(); err != nil {
				t.Fatalf("Err before the deadline = %v", err)
			}
			time.Sleep(5*time.Second - time.Nanosecond)
			if err := r.Err(); err != nil {
				t.Fatalf("Err just before the deadline = %v", err)
			}
			time.Sleep(time.Nanosecond)
			synctest.Wait()
			if err := r.Err(); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Err at the deadline = %v", err)
			}
			select {
			case <-r.Done():
			default:
				t.Fatal("not done at the deadline")
			}
			if r.Value(ctxKey{}) != "v" {
				t.Fatal("values lost once the timer was made")
			}
		})
	}
}

// Contexts derived from a release context end with it: at its deadline, or
// when the release stops it; goroutines racing to make its timer share one.
func TestReleaseCtxDerived(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newReleaseCtx(t.Context(), time.Now().Add(time.Second))
		var wg sync.WaitGroup
		dones := make([]<-chan struct{}, 8)
		for i := range dones {
			wg.Go(func() { dones[i] = r.Done() })
		}
		wg.Wait()
		for _, d := range dones[1:] {
			if d != dones[0] {
				t.Fatal("Done returned different channels")
			}
		}
		child, cancel := context.WithCancel(r)
		defer cancel()
		var fired bool
		stop := context.AfterFunc(r, func() { fired = true })
		defer stop()
		time.Sleep(time.Second)
		synctest.Wait()
		if child.Err() == nil || !fired {
			t.Fatalf("at the deadline: child err %v, AfterFunc ran %v", child.Err(), fired)
		}

		r = newReleaseCtx(t.Context(), time.Now().Add(time.Hour))
		child, cancel = context.WithCancel(r)
		defer cancel()
		r.stop()
		if child.Err() == nil {
			t.Fatal("child of a stopped release context is not done")
		}
	})
}
