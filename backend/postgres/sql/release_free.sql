-- The common case of release, sent as a prepared statement of its own:
-- nobody waits for the name. It locks the name's row where it shows that,
-- deletes the lease and takes its weight off the row, and answers
-- "released" (or "revoked", or "not_held" for an expired lease, as release
-- does), committing without waiting for the disk (see release in
-- functions.sql). The name's row is locked before the lease row is
-- deleted, the lock order of every step. It answers nothing, and changes
-- nothing, if someone waits or the lease is unknown; the client then calls
-- release.
-- $1 name, $2 id.
WITH n AS (
	SELECT x.lim FROM {{names}} x WHERE x.name = $1::text AND x.waiting = 0 FOR UPDATE
), d AS (
	DELETE FROM {{leases}} x USING n
	WHERE x.name = $1::text AND x.id = $2::text AND (NOT x.revoked OR x.holds)
	RETURNING x.weight, x.expires_at > now() AS live, x.revoked, n.lim
), u AS (
	UPDATE {{names}} x SET used = x.used - d.weight FROM d WHERE x.name = $1::text
	RETURNING d.live, d.revoked, d.lim
)
SELECT CASE WHEN u.live AND u.revoked THEN 'revoked' WHEN u.live THEN 'released' ELSE 'not_held' END,
	$1::text, ''::text, ''::text, ''::text, 0, 0::bigint, 0::bigint, u.lim::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint
FROM u
WHERE set_config('synchronous_commit', 'off', true) = 'off'
