package pgbench

import (
	"strconv"
	"testing"

	"github.com/sema-dev/sema/bench/internal/drive"
)

// leaseRowTable is the floor of the uncontended pair (leaseRowOnly): a
// lease row with a token from a sequence, and nothing else.
const leaseRowTable = `CREATE TABLE IF NOT EXISTS floor_leases (
	name       text COLLATE "C" NOT NULL,
	id         text COLLATE "C" NOT NULL,
	token      bigint NOT NULL,
	owner      text NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (name, id)
);
CREATE SEQUENCE IF NOT EXISTS floor_tokens AS bigint`

// leaseRowOnly is the least a durable grant with a fencing token costs
// here, and so a floor under sema's uncontended pair: each turn inserts a
// lease row with the next token of a sequence (a durable commit, as
// sema's grant), then deletes it (committed without waiting for the disk,
// as sema's release). It is no lock: nothing checks the name's other
// leases, its limit or its queue, and nothing counts them.
func leaseRowOnly(b *testing.B) {
	pool := conns(b, 1)
	if _, err := pool.Exec(bg, leaseRowTable); err != nil {
		b.Fatal(err)
	}
	name, run := "bench/solo/"+runID(), runID()
	turn := 0
	elapsed := drive.Run(b, 1, func(int) error {
		turn++
		id := run + "-" + strconv.Itoa(turn)
		if _, err := pool.Exec(bg, `INSERT INTO floor_leases (name, id, token, owner, expires_at)
			VALUES ($1, $2, nextval('floor_tokens'), 'bench', now() + interval '30 s')`, name, id); err != nil {
			return err
		}
		_, err := pool.Exec(bg, `WITH d AS (DELETE FROM floor_leases WHERE name = $1 AND id = $2 RETURNING 1)
			SELECT set_config('synchronous_commit', 'off', true) FROM d`, name, id)
		return err
	})
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pairs/s")
}
