package postgres_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sema-dev/sema"
	"github.com/sema-dev/sema/backend/postgres"
)

// Open a backend on a database and hold a lock with it.
func ExampleOpen() {
	ctx := context.Background()
	cfg, err := postgres.ParseURL("postgres://app@db.example:5432/app?sslmode=require")
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := postgres.Open(ctx, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	c := sema.New(b)
	defer c.Close()
	l, err := c.Mutex("nightly-report").Acquire(ctx, sema.WithTTL(30*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Release(ctx)
	fmt.Println("token", l.Token(), "wake-up:", c.Guarantees().Wakeup)
}

// Behind PgBouncer in transaction mode, the pool goes through the pooler
// and the listen connection to the database itself; sema's own parameters
// are taken out of the URL handed to pgx.
func ExampleParseURL() {
	cfg, err := postgres.ParseURL("postgres://app@pgbouncer:6432/app?sslmode=disable&sema_listen=db1:5432&sema_prefix=jobs_")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.URL)
	fmt.Println(cfg.ListenURL)
	fmt.Println(cfg.TablePrefix)

	_, err = postgres.ParseURL("postgres://app:secret@db1/app?sema_prefix=no-dashes")
	fmt.Println(err)
	// Output:
	// postgres://app@pgbouncer:6432/app?sslmode=disable
	// postgres://app@db1:5432/app?sslmode=disable
	// jobs_
	// postgres: sema: invalid argument: table prefix "no-dashes": use at most 50 letters, digits and underscores
}
