-- The common case of acquire, sent as a prepared statement of its own:
-- the name's permits are free and nobody waits. It updates the name's row
-- where it shows that (which locks the row), adds the lease, and answers
-- the "granted" row, committing durably (see durable in functions.sql).
-- It answers nothing, and changes nothing, if the row shows otherwise or
-- is missing; a retried request whose lease exists fails the statement
-- with a unique violation of the leases' key, which undoes it all. Either
-- way the client then calls acquire, which copes with every case. The
-- same steps as the start of acquire, without the function call: a
-- prepared statement runs them in less time than a call of a PL/pgSQL
-- function does.
-- $1 name, $2 id, $3 owner, $4 host, $5 pid, $6 limit, $7 weight, $8 TTL (µs).
WITH n AS (
	UPDATE {{names}} x SET used = x.used + $7::bigint
	WHERE x.name = $1::text AND x.lim = $6::bigint AND x.waiting = 0 AND x.used + $7::bigint <= x.lim
	RETURNING x.lim
), l AS (
	INSERT INTO {{leases}} AS y (name, id, token, owner, weight, host, pid, acquired_at, renewed_at, expires_at)
	SELECT $1::text, $2::text, {{next_token}}, $3::text, $7::bigint, $4::text, $5::integer,
		now(), now(), now() + $8::bigint * interval '1 microsecond'
	FROM n
	RETURNING y.*
)
SELECT 'granted'::text, l.name::text, l.id::text, l.owner, l.host, l.pid, l.weight::bigint, l.token, n.lim::bigint,
	0::bigint, {{us}}(l.acquired_at), {{us}}(l.renewed_at), {{us}}(l.expires_at)
FROM n, l
WHERE current_setting('synchronous_commit') <> 'off' OR set_config('synchronous_commit', 'on', true) = 'on'
