package pgbench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// drupalLock is Drupal's DatabaseLockBackend (core/lib/Drupal/Core/Lock),
// translated statement by statement: a row per held lock in the semaphore
// table, acquire by INSERT, release by DELETE, an expired row removed by a
// compare-and-delete, and waiting by polling (LockBackendAbstract::wait).
// The expiry is the client's clock in seconds, as microtime(TRUE).
type drupalLock struct {
	db     *pgxpool.Pool
	lockID string // uniqid(mt_rand(), TRUE): one per request
}

// drupalTable is Drupal's schema of the semaphore table.
const drupalTable = `CREATE TABLE IF NOT EXISTS semaphore (
	name varchar(255) NOT NULL DEFAULT '' PRIMARY KEY,
	value varchar(255) NOT NULL DEFAULT '',
	expire double precision NOT NULL
);
CREATE INDEX IF NOT EXISTS semaphore_value ON semaphore (value);
CREATE INDEX IF NOT EXISTS semaphore_expire ON semaphore (expire)`

func newDrupalLock(db *pgxpool.Pool) *drupalLock {
	return &drupalLock{db: db, lockID: strconv.FormatUint(rand.Uint64(), 16) + "." + strconv.FormatInt(time.Now().UnixNano(), 10)}
}

func microtime() float64 { return float64(time.Now().UnixNano()) / 1e9 }

// acquire is DatabaseLockBackend::acquire for a lock this request does not
// hold yet: INSERT; on a unique violation, once, lockMayBeAvailable (which
// deletes an expired row) and INSERT again.
func (d *drupalLock) acquire(ctx context.Context, name string, timeout float64) (bool, error) {
	retry := false
	for {
		_, err := d.db.Exec(ctx, "INSERT INTO semaphore (name, value, expire) VALUES ($1, $2, $3)",
			name, d.lockID, microtime()+timeout)
		if err == nil {
			return true, nil
		}
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "23505" {
			return false, err
		}
		if retry {
			return false, nil
		}
		if retry, err = d.mayBeAvailable(ctx, name); err != nil || !retry {
			return false, err
		}
	}
}

// mayBeAvailable is lockMayBeAvailable: free if there is no row, or if its
// row has expired and this call deletes it.
func (d *drupalLock) mayBeAvailable(ctx context.Context, name string) (bool, error) {
	var expire float64
	var value string
	err := d.db.QueryRow(ctx, "SELECT expire, value FROM semaphore WHERE name = $1", name).Scan(&expire, &value)
	if err != nil {
		if err.Error() == "no rows in result set" {
			return true, nil
		}
		return false, err
	}
	if expire < microtime() {
		tag, err := d.db.Exec(ctx, "DELETE FROM semaphore WHERE name = $1 AND value = $2 AND expire = $3", name, value, expire)
		return err == nil && tag.RowsAffected() > 0, err
	}
	return false, nil
}

// wait is LockBackendAbstract::wait($name, $delay = 30): sleep 25 ms, then
// 25 ms more each time up to 500 ms, until lockMayBeAvailable. It returns
// false when the lock may be available.
func (d *drupalLock) wait(ctx context.Context, name string) (bool, error) {
	delay := 30 * time.Second
	sleep := 25 * time.Millisecond
	for delay > 0 {
		time.Sleep(sleep)
		delay -= sleep
		sleep = min(500*time.Millisecond, sleep+25*time.Millisecond, delay)
		free, err := d.mayBeAvailable(ctx, name)
		if err != nil || free {
			return false, err
		}
	}
	return true, nil
}

// lock takes the lock as Drupal's callers that must have it do:
// acquire, else wait and try again.
func (d *drupalLock) lock(ctx context.Context, name string) error {
	for {
		ok, err := d.acquire(ctx, name, 30)
		if err != nil || ok {
			return err
		}
		if _, err := d.wait(ctx, name); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("lock %q: %w", name, ctx.Err())
		}
	}
}

// release is DatabaseLockBackend::release.
func (d *drupalLock) release(ctx context.Context, name string) error {
	_, err := d.db.Exec(ctx, "DELETE FROM semaphore WHERE name = $1 AND value = $2", name, d.lockID)
	return err
}
