package file_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/file"
	"golang.org/x/sys/unix"
)

// A name this backend has not opened yet (or closed after IdleClose), as in
// sema bench pivot's sharded layout, where a worker comes back to a server
// only every few seconds: Acquire opens the state file, takes a liveness
// slot and reads the record whole. The files exist (made by another
// backend), as on an installation in use. Against opening an existing lock
// file and flock(2) on it.
func BenchmarkFirstOpen(b *testing.B) {
	const names = 4096
	name := func(i int) string { return "cold-" + strconv.Itoa(i%names) }
	b.Run("sema", func(b *testing.B) {
		dir := b.TempDir()
		pre := open(b, dir)
		ctx := context.Background()
		for i := range names {
			req := sema.Request{Name: name(i), ID: "pre-" + strconv.Itoa(i), Limit: 1, Weight: 1, TTL: sema.DefaultTTL}
			if _, err := pre.Acquire(ctx, req); err != nil {
				b.Fatal(err)
			}
			if err := pre.Release(ctx, req.Name, req.ID); err != nil {
				b.Fatal(err)
			}
		}
		pre.Close()
		var (
			be *file.Backend
			c  *sema.Client
		)
		for i := 0; b.Loop(); i++ {
			if i%names == 0 { // a fresh backend: every name is opened again
				b.StopTimer()
				if be != nil {
					c.Close()
					be.Close()
				}
				be = open(b, dir)
				c = sema.New(be)
				b.StartTimer()
			}
			l, err := c.Mutex(name(i)).Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
		c.Close()
		be.Close()
	})
	b.Run("flock-osfile", func(b *testing.B) {
		dir := b.TempDir()
		for i := range names {
			if err := os.WriteFile(filepath.Join(dir, name(i)), nil, 0o600); err != nil {
				b.Fatal(err)
			}
		}
		for i := 0; b.Loop(); i++ {
			f, err := os.OpenFile(filepath.Join(dir, name(i)), os.O_RDWR|os.O_CREATE, 0o600)
			if err != nil {
				b.Fatal(err)
			}
			flock(b, int(f.Fd()), unix.LOCK_EX)
			flock(b, int(f.Fd()), unix.LOCK_UN)
			f.Close()
		}
	})
}
