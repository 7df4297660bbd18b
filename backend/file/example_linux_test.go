package file_test

import (
	"context"
	"fmt"
	"os"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/file"
)

func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "sema-example")
	defer os.RemoveAll(dir)
	b, err := file.Open(dir, nil) // nil: the defaults
	if err != nil {
		fmt.Println(err)
		return
	}
	c := sema.New(b)
	defer c.Close()

	ctx := context.Background()
	l, err := c.Semaphore("nightly-report", 3).Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("token", l.Token(), "scope", c.Guarantees().Scope)
	l.Release(ctx)

	// Tokens persist in the name's file: another process, or a later one,
	// continues from there.
	l, _ = c.Semaphore("nightly-report", 3).Acquire(ctx)
	fmt.Println("token", l.Token())
	l.Release(ctx)
	// Output:
	// token 1 scope host
	// token 2
}
