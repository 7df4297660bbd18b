-- The steps of sema on PostgreSQL, one function each, so that every step is
-- one statement: one round trip and one short transaction. Each step on a
-- name locks the name's row first and then touches only that name's leases
-- and waiters: one lock order for all, so steps never deadlock. No step
-- waits for anything but those row locks, and none holds a lock while a
-- client waits.
--
-- The functions that walk a name's leases or waiters plan without bitmap
-- scans: the planner sees tiny tables, but a busy name leaves many index
-- entries of deleted rows behind, which an index scan marks dead and skips
-- from then on and a bitmap scan reads every time. (The common paths of
-- acquire and release look rows up by their keys only, and do without the
-- cost of that setting.)
--
-- Expiry is judged at now(), the start of the step's transaction: a step
-- that waited for the name's lock never sees a lease as expired before the
-- database's clock passed its expiry. Grants and renewals commit with
-- synchronous_commit on (durable: a grant the client learns of survives a
-- crash); steps that only queue, check or leave commit without waiting for
-- the disk (lazy).

-- durable makes the transaction commit durably even where the server's
-- default is synchronous_commit = off: tokens and grants must not go back.
CREATE OR REPLACE FUNCTION {{durable}}() RETURNS void
LANGUAGE plpgsql AS $sema$
BEGIN
	IF current_setting('synchronous_commit') = 'off' THEN
		PERFORM set_config('synchronous_commit', 'on', true);
	END IF;
END
$sema$;

-- lazy lets a transaction that granted and renewed nothing commit without
-- waiting for the disk: losing it in a crash loses no safety (a waiter
-- queues again, a lease given back stays until its expiry).
CREATE OR REPLACE FUNCTION {{lazy}}() RETURNS void
LANGUAGE plpgsql AS $sema$
BEGIN
	PERFORM set_config('synchronous_commit', 'off', true);
END
$sema$;

-- us is t in microseconds since the Unix epoch (0 for NULL).
CREATE OR REPLACE FUNCTION {{us}}(t timestamptz) RETURNS bigint
LANGUAGE sql STABLE AS $sema$
	SELECT coalesce((extract(epoch FROM t) * 1000000)::bigint, 0);
$sema$;

CREATE OR REPLACE FUNCTION {{lease_row}}(p_kind text, l {{leases}}, p_lim bigint) RETURNS {{row}}
LANGUAGE sql STABLE AS $sema$
	SELECT ROW(p_kind, l.name, l.id, l.owner, l.host, l.pid, l.weight, l.token, p_lim, 0::bigint,
		{{us}}(l.acquired_at), {{us}}(l.renewed_at), {{us}}(l.expires_at))::{{row}};
$sema$;

CREATE OR REPLACE FUNCTION {{status_row}}(p_kind text, p_name text, p_lim bigint, p_n bigint) RETURNS {{row}}
LANGUAGE sql IMMUTABLE AS $sema$
	SELECT ROW(p_kind, p_name, '', '', '', 0, 0::bigint, 0::bigint, p_lim, p_n, 0::bigint, 0::bigint, 0::bigint)::{{row}};
$sema$;

-- queued_row describes the queued request p_id, with when its client
-- should look again if no event comes: at the expiry of the waiter just
-- ahead (it may be dead), or for the head, at the earliest holder's expiry.
CREATE OR REPLACE FUNCTION {{queued_row}}(p_name text, p_id text, p_lim bigint) RETURNS {{row}}
LANGUAGE plpgsql SET enable_bitmapscan = off AS $sema$
DECLARE
	q      {{waiters}}%ROWTYPE;
	v_next timestamptz;
BEGIN
	SELECT * INTO q FROM {{waiters}} x WHERE x.name = p_name AND x.id = p_id;
	SELECT x.expires_at INTO v_next FROM {{waiters}} x
	WHERE x.name = p_name AND x.ticket < q.ticket ORDER BY x.ticket DESC LIMIT 1;
	IF NOT FOUND THEN
		SELECT x.expires_at INTO v_next FROM {{leases}} x WHERE x.name = p_name AND (NOT x.revoked OR x.holds)
		ORDER BY x.expires_at LIMIT 1;
	END IF;
	RETURN ROW('queued', p_name, p_id, q.owner, q.host, q.pid, q.weight, q.ticket, p_lim,
		CASE WHEN v_next IS NULL THEN -1
			ELSE greatest(0, (extract(epoch FROM v_next - now()) * 1000000)::bigint) END,
		{{us}}(q.since), 0::bigint, {{us}}(q.expires_at))::{{row}};
END
$sema$;

-- expire drops the name's expired leases and takes their weights off the
-- name's sum. The caller holds the name's lock. Deleting (so locking) an
-- expired lease before its permits count as free is what makes a renewal
-- racing with its expiry safe: the renewal either commits first (and the
-- row, looked at again, is no longer expired) or finds the row gone.
-- Expired waiters are dropped as the queue is walked (grant_waiters).
CREATE OR REPLACE FUNCTION {{expire}}(p_name text) RETURNS bigint
LANGUAGE plpgsql SET enable_bitmapscan = off AS $sema$
DECLARE
	v_freed bigint;
BEGIN
	WITH d AS (
		DELETE FROM {{leases}} x WHERE x.name = p_name AND x.expires_at <= now()
		RETURNING x.weight, x.revoked, x.holds
	) SELECT coalesce(sum(d.weight) FILTER (WHERE NOT d.revoked OR d.holds), 0) INTO v_freed FROM d;
	IF v_freed > 0 THEN
		UPDATE {{names}} x SET used = x.used - v_freed WHERE x.name = p_name;
	END IF;
	RETURN v_freed; -- the permits freed
END
$sema$;

-- grant_waiters grants queued requests in arrival order while the head
-- fits (a later, smaller request never overtakes it), in the caller's
-- transaction, and tells their clients by NOTIFY on the channel each
-- request was queued with (its process's: no other process hears of it),
-- which PostgreSQL delivers when the transaction commits. A payload lists
-- the grants of one channel as "id,token,acquired-µs" separated by spaces.
-- A request queued without a channel (by a sema of schema version 2) is
-- told on p_channel, the step's. A waiter whose own short lease has
-- expired (its client stopped checking: dead) is dropped on the way. The
-- caller holds the name's lock and has dropped the expired leases that
-- hold permits (expire).
CREATE OR REPLACE FUNCTION {{grant_waiters}}(p_name text, p_channel text) RETURNS SETOF {{row}}
LANGUAGE plpgsql SET enable_bitmapscan = off AS $sema$
DECLARE
	n         {{names}}%ROWTYPE;
	w         {{waiters}}%ROWTYPE;
	l         {{leases}}%ROWTYPE;
	v_granted bigint := 0;
	v_dropped bigint := 0;
	v_weight  bigint := 0;
	v_ticket  bigint := 0;
	v_payload text := '';
	v_to      text := '';
	v_channel text;
BEGIN
	SELECT * INTO n FROM {{names}} x WHERE x.name = p_name;
	IF n.waiting = 0 OR n.used >= n.lim THEN
		RETURN; -- nobody to serve, or nothing free (dead waiters wait until something is)
	END IF;
	LOOP
		EXIT WHEN n.used + v_weight >= n.lim; -- nothing left to give
		-- One waiter at a time, in order: an index probe each, however many
		-- wait (or were queued and left: their index entries too).
		SELECT * INTO w FROM {{waiters}} x WHERE x.name = p_name AND x.ticket > v_ticket
		ORDER BY x.ticket LIMIT 1;
		EXIT WHEN NOT FOUND;
		v_ticket := w.ticket;
		IF w.expires_at <= now() THEN
			DELETE FROM {{waiters}} x WHERE x.name = p_name AND x.id = w.id;
			v_dropped := v_dropped + 1;
			CONTINUE;
		END IF;
		EXIT WHEN n.used + v_weight + w.weight > n.lim;
		-- The request becomes a lease, dated when it is made: after the
		-- request was queued, so the client's deadline (counted from its
		-- request) falls before the lease's expiry.
		WITH d AS (DELETE FROM {{waiters}} x WHERE x.name = p_name AND x.id = w.id RETURNING x.*)
		INSERT INTO {{leases}} AS y (name, id, token, owner, weight, host, pid, acquired_at, renewed_at, expires_at)
		SELECT d.name, d.id, {{next_token}}, d.owner, d.weight, d.host, d.pid,
			c.t, c.t, c.t + d.ttl_us * interval '1 microsecond'
		FROM d, LATERAL (SELECT clock_timestamp() AS t) c
		RETURNING y.* INTO l;
		v_granted := v_granted + 1;
		v_weight := v_weight + w.weight;
		v_channel := CASE WHEN w.channel <> '' THEN w.channel ELSE p_channel END;
		IF v_payload <> '' AND (v_channel <> v_to OR length(v_payload) > 7000) THEN -- payloads are below 8000 bytes
			PERFORM pg_notify(v_to, v_payload);
			v_payload := '';
		END IF;
		IF v_payload <> '' THEN
			v_payload := v_payload || ' ';
		END IF;
		v_to := v_channel;
		v_payload := v_payload || l.id || ',' || l.token || ',' || {{us}}(l.acquired_at);
		RETURN NEXT {{lease_row}}('grant', l, n.lim);
	END LOOP;
	IF v_granted + v_dropped > 0 THEN
		UPDATE {{names}} x SET used = x.used + v_weight, waiting = x.waiting - v_granted - v_dropped
		WHERE x.name = p_name;
	END IF;
	IF v_granted > 0 THEN
		IF current_setting('synchronous_commit') = 'off' THEN
			PERFORM set_config('synchronous_commit', 'on', true); -- see durable
		END IF;
		PERFORM pg_notify(v_to, v_payload);
	END IF;
END
$sema$;

-- acquire grants p_weight permits of p_name at once if they are free and
-- nobody waits; else, if p_queue, queues the request; else answers "held"
-- followed by the holders. A repeated request (same p_id) returns its lease,
-- or its place in the queue, unchanged. When the name's row shows the
-- permits free and nobody queued (the common case) it is two statements:
-- update the row where it shows that (which locks it), add the lease.
-- Otherwise the request takes the careful path, which locks the row
-- first. (acquire_free.sql is the common case as a statement of its own,
-- which a client with prepared statements may send first: see free.go.)
CREATE OR REPLACE FUNCTION {{acquire}}(p_name text, p_id text, p_owner text, p_host text, p_pid integer,
	p_limit bigint, p_weight bigint, p_ttl_us bigint, p_queue boolean, p_channel text, p_wttl_us bigint)
RETURNS SETOF {{row}}
LANGUAGE plpgsql AS $sema$
DECLARE
	n         {{names}}%ROWTYPE;
	l         {{leases}}%ROWTYPE;
	g         {{row}};
	v_granted bigint := 0;
	v_fast    boolean;
	v_mine    boolean;
	v_queued  boolean;
BEGIN
	-- The common case. A row that shows otherwise is left as it is,
	-- unlocked, until the careful path locks it; a missing one (a name not
	-- in use) is made, and shows the permits free unless another step made
	-- it first.
	LOOP
		UPDATE {{names}} x SET used = x.used + p_weight
		WHERE x.name = p_name AND x.lim = p_limit AND x.waiting = 0 AND x.used + p_weight <= x.lim;
		v_fast := FOUND;
		EXIT WHEN v_fast;
		SELECT * INTO n FROM {{names}} x WHERE x.name = p_name FOR UPDATE;
		EXIT WHEN FOUND;
		-- If another step makes it first, wait for that one and look again;
		-- if a sweep deletes it in between, make it again.
		INSERT INTO {{names}} (name, lim) VALUES (p_name, p_limit) ON CONFLICT (name) DO NOTHING;
	END LOOP;
	IF v_fast THEN
		INSERT INTO {{leases}} AS x (name, id, token, owner, weight, host, pid, acquired_at, renewed_at, expires_at)
		VALUES (p_name, p_id, {{next_token}}, p_owner, p_weight, p_host, p_pid,
			now(), now(), now() + p_ttl_us * interval '1 microsecond')
		ON CONFLICT (name, id) DO NOTHING
		RETURNING x.* INTO l;
		IF FOUND THEN
			IF current_setting('synchronous_commit') = 'off' THEN
				PERFORM set_config('synchronous_commit', 'on', true); -- see durable
			END IF;
			RETURN NEXT {{lease_row}}('granted', l, p_limit);
			RETURN;
		END IF;
		-- A retry of a request granted before: undo, and answer below.
		UPDATE {{names}} x SET used = x.used - p_weight WHERE x.name = p_name RETURNING x.* INTO n;
	END IF;

	-- The careful path (not free by the sums, another limit, a retry):
	-- expire what is due (a retry must not find its lease expired, nor a
	-- new request be refused for permits that are free), serve the queue if
	-- permits are free, then decide.
	n.used := n.used - {{expire}}(p_name);
	IF n.waiting > 0 AND n.used < n.lim THEN -- else grant_waiters has nothing to do
		FOR g IN SELECT * FROM {{grant_waiters}}(p_name, p_channel) LOOP
			v_granted := v_granted + 1;
			RETURN NEXT g;
		END LOOP;
		SELECT * INTO n FROM {{names}} x WHERE x.name = p_name;
	END IF;
	SELECT EXISTS (SELECT 1 FROM {{leases}} x WHERE x.name = p_name AND x.id = p_id),
		EXISTS (SELECT 1 FROM {{waiters}} x WHERE x.name = p_name AND x.id = p_id)
	INTO v_mine, v_queued;
	IF v_mine THEN -- a retry, or a queued request granted just now
		SELECT * INTO l FROM {{leases}} x WHERE x.name = p_name AND x.id = p_id;
		RETURN NEXT {{lease_row}}(CASE WHEN l.revoked THEN 'revoked' ELSE 'granted' END, l, n.lim);
		RETURN;
	END IF;
	IF v_queued AND p_queue THEN
		UPDATE {{waiters}} x SET expires_at = now() + p_wttl_us * interval '1 microsecond'
		WHERE x.name = p_name AND x.id = p_id;
		RETURN NEXT {{queued_row}}(p_name, p_id, n.lim);
		IF v_granted = 0 THEN
			PERFORM {{lazy}}();
		END IF;
		RETURN;
	END IF;
	IF n.lim <> p_limit AND NOT v_queued THEN
		IF n.used > 0 OR n.waiting > 0 THEN
			RETURN NEXT {{status_row}}('mismatch', p_name, n.lim, 0);
			RETURN;
		END IF;
		UPDATE {{names}} x SET lim = p_limit WHERE x.name = p_name;
		n.lim := p_limit;
	END IF;

	IF n.waiting = 0 AND n.used + p_weight <= n.lim THEN
		INSERT INTO {{leases}} AS x (name, id, token, owner, weight, host, pid, acquired_at, renewed_at, expires_at)
		VALUES (p_name, p_id, {{next_token}}, p_owner, p_weight, p_host, p_pid,
			now(), now(), now() + p_ttl_us * interval '1 microsecond')
		RETURNING x.* INTO l;
		UPDATE {{names}} x SET used = x.used + p_weight WHERE x.name = p_name;
		PERFORM {{durable}}();
		RETURN NEXT {{lease_row}}('granted', l, n.lim);
		RETURN;
	END IF;
	IF p_queue THEN
		WITH i AS (
			INSERT INTO {{waiters}} (name, id, owner, weight, host, pid, ttl_us, since, expires_at, channel)
			VALUES (p_name, p_id, p_owner, p_weight, p_host, p_pid, p_ttl_us, now(),
				now() + p_wttl_us * interval '1 microsecond', p_channel)
			RETURNING 1
		) UPDATE {{names}} x SET waiting = x.waiting + 1 FROM i WHERE x.name = p_name;
		RETURN NEXT {{queued_row}}(p_name, p_id, n.lim);
	ELSE
		RETURN NEXT {{status_row}}('held', p_name, n.lim, n.waiting);
		RETURN QUERY SELECT ({{lease_row}}('holder', x, n.lim)).* FROM {{leases}} x
			WHERE x.name = p_name AND (NOT x.revoked OR x.holds) ORDER BY x.token;
	END IF;
	IF v_granted = 0 THEN
		PERFORM {{lazy}}();
	END IF;
END
$sema$;

-- poll is a waiting client's look at its request when an expiry that may
-- free its turn is due (its holder's, or the waiter's just ahead): it
-- expires what is due, grants what now fits, renews the request's own short
-- lease, and answers "granted" (the lease), "queued" (with when to look
-- again), "revoked" or "gone" (the request expired from the queue).
CREATE OR REPLACE FUNCTION {{poll}}(p_name text, p_id text, p_channel text, p_wttl_us bigint)
RETURNS SETOF {{row}}
LANGUAGE plpgsql AS $sema$
DECLARE
	n         {{names}}%ROWTYPE;
	l         {{leases}}%ROWTYPE;
	g         {{row}};
	v_granted bigint := 0;
BEGIN
	SELECT * INTO n FROM {{names}} x WHERE x.name = p_name FOR UPDATE;
	IF NOT FOUND THEN
		RETURN NEXT {{status_row}}('gone', p_name, 0, 0);
		PERFORM {{lazy}}();
		RETURN;
	END IF;
	PERFORM {{expire}}(p_name);
	FOR g IN SELECT * FROM {{grant_waiters}}(p_name, p_channel) LOOP
		v_granted := v_granted + 1;
		RETURN NEXT g;
	END LOOP;
	SELECT * INTO l FROM {{leases}} x WHERE x.name = p_name AND x.id = p_id;
	IF FOUND THEN
		RETURN NEXT {{lease_row}}(CASE WHEN l.revoked THEN 'revoked' ELSE 'granted' END, l, n.lim);
		RETURN;
	END IF;
	UPDATE {{waiters}} x SET expires_at = now() + p_wttl_us * interval '1 microsecond'
	WHERE x.name = p_name AND x.id = p_id;
	IF FOUND THEN
		RETURN NEXT {{queued_row}}(p_name, p_id, n.lim);
	ELSE
		RETURN NEXT {{status_row}}('gone', p_name, n.lim, 0);
	END IF;
	IF v_granted = 0 THEN
		PERFORM {{lazy}}();
	END IF;
END
$sema$;

-- check is a waiting client's routine look at its request, between
-- events: it renews the request's own short lease and answers "queued"
-- (with when to look again), "granted", "revoked" or "gone". It takes no
-- lock on the name (a row lock on the request only, as renew does on a
-- lease), so that the waiters of a busy name do not stand in the way of
-- its hand-offs; what only a step holding the name's lock may do
-- (expiring, granting) is poll's.
CREATE OR REPLACE FUNCTION {{check}}(p_name text, p_id text, p_wttl_us bigint)
RETURNS SETOF {{row}}
LANGUAGE plpgsql AS $sema$
DECLARE
	l {{leases}}%ROWTYPE;
BEGIN
	UPDATE {{waiters}} x SET expires_at = now() + p_wttl_us * interval '1 microsecond'
	WHERE x.name = p_name AND x.id = p_id AND x.expires_at > now();
	IF FOUND THEN
		RETURN NEXT {{queued_row}}(p_name, p_id, 0);
	ELSE
		SELECT * INTO l FROM {{leases}} x WHERE x.name = p_name AND x.id = p_id;
		IF FOUND THEN
			RETURN NEXT {{lease_row}}(CASE WHEN l.revoked THEN 'revoked' ELSE 'granted' END, l, 0);
		ELSE
			RETURN NEXT {{status_row}}('gone', p_name, 0, 0);
		END IF;
	END IF;
	PERFORM {{lazy}}();
END
$sema$;

-- leave takes a request whose client gave up out of the queue, or gives
-- back the permits it was granted meanwhile, and passes them on.
CREATE OR REPLACE FUNCTION {{leave}}(p_name text, p_id text, p_channel text)
RETURNS SETOF {{row}}
LANGUAGE plpgsql AS $sema$
DECLARE
	g         {{row}};
	v_granted bigint := 0;
	v_left    bigint;
	v_freed   bigint;
BEGIN
	PERFORM FROM {{names}} x WHERE x.name = p_name FOR UPDATE;
	IF NOT FOUND THEN
		RETURN;
	END IF;
	WITH d AS (DELETE FROM {{waiters}} x WHERE x.name = p_name AND x.id = p_id RETURNING 1)
	SELECT count(*) INTO v_left FROM d;
	WITH d AS (DELETE FROM {{leases}} x WHERE x.name = p_name AND x.id = p_id AND (NOT x.revoked OR x.holds) RETURNING x.weight)
	SELECT coalesce(sum(d.weight), 0) INTO v_freed FROM d;
	IF v_left + v_freed > 0 THEN
		UPDATE {{names}} x SET used = x.used - v_freed, waiting = x.waiting - v_left WHERE x.name = p_name;
	END IF;
	PERFORM {{expire}}(p_name);
	FOR g IN SELECT * FROM {{grant_waiters}}(p_name, p_channel) LOOP
		v_granted := v_granted + 1;
		RETURN NEXT g;
	END LOOP;
	IF v_granted = 0 THEN
		PERFORM {{lazy}}();
	END IF;
END
$sema$;

-- release ends the live lease p_id ("released"; "revoked" if it was
-- force-released but held its permits still; "not_held" if it is unknown,
-- expired or revoked with its permits freed) and hands its permits to the queue, if
-- anyone waits. Without waiters it is two statements, and it commits
-- without waiting for the disk (lazy): if the database crashes before the
-- release is written, the lease is back after the restart until it
-- expires; nobody else can have been granted its permits meanwhile, as any
-- later grant's durable commit writes the release first. (release_free.sql
-- is the case without waiters as a statement of its own.)
CREATE OR REPLACE FUNCTION {{release}}(p_name text, p_id text, p_channel text)
RETURNS SETOF {{row}}
LANGUAGE plpgsql AS $sema$
DECLARE
	n         {{names}}%ROWTYPE;
	g         {{row}};
	v_live    boolean;
	v_forced  boolean;
	v_used    bigint;
	v_granted bigint := 0;
BEGIN
	SELECT * INTO n FROM {{names}} x WHERE x.name = p_name FOR UPDATE;
	IF NOT FOUND THEN
		RETURN NEXT {{status_row}}('not_held', p_name, 0, 0);
		RETURN;
	END IF;
	WITH d AS (
		DELETE FROM {{leases}} x WHERE x.name = p_name AND x.id = p_id AND (NOT x.revoked OR x.holds)
		RETURNING x.weight, x.expires_at > now() AS live, x.revoked
	)
	UPDATE {{names}} x SET used = x.used - d.weight FROM d WHERE x.name = p_name
	RETURNING d.live, d.revoked, x.used INTO v_live, v_forced, v_used;
	IF n.waiting > 0 THEN
		IF coalesce(v_used, n.used) > 0 THEN -- other leases may have expired meanwhile
			PERFORM {{expire}}(p_name);
		END IF;
		FOR g IN SELECT * FROM {{grant_waiters}}(p_name, p_channel) LOOP
			v_granted := v_granted + 1;
			RETURN NEXT g;
		END LOOP;
	END IF;
	IF v_granted = 0 THEN
		PERFORM set_config('synchronous_commit', 'off', true); -- see lazy
	END IF;
	RETURN NEXT ROW(CASE WHEN v_live AND v_forced THEN 'revoked' WHEN v_live THEN 'released' ELSE 'not_held' END,
		p_name, '', '', '', 0,
		0::bigint, 0::bigint, n.lim, 0::bigint, 0::bigint, 0::bigint, 0::bigint)::{{row}};
END
$sema$;

-- renew extends the live lease p_id to now + p_ttl_us (compare-and-extend:
-- it never re-creates a lease) and answers "granted", or "revoked" or
-- "lost". It needs no lock on the name: see expire.
CREATE OR REPLACE FUNCTION {{renew}}(p_name text, p_id text, p_ttl_us bigint)
RETURNS SETOF {{row}}
LANGUAGE plpgsql AS $sema$
DECLARE
	g {{row}};
BEGIN
	UPDATE {{leases}} x SET renewed_at = now(), expires_at = now() + p_ttl_us * interval '1 microsecond'
	FROM {{names}} n
	WHERE x.name = p_name AND x.id = p_id AND NOT x.revoked AND x.expires_at > now() AND n.name = p_name
	RETURNING ({{lease_row}}('granted', x, n.lim)).* INTO g;
	IF FOUND THEN
		IF current_setting('synchronous_commit') = 'off' THEN
			PERFORM set_config('synchronous_commit', 'on', true); -- see durable
		END IF;
		RETURN NEXT g;
	ELSIF EXISTS (SELECT 1 FROM {{leases}} x WHERE x.name = p_name AND x.id = p_id AND x.revoked) THEN
		RETURN NEXT {{status_row}}('revoked', p_name, 0, 0);
	ELSE
		RETURN NEXT {{status_row}}('lost', p_name, 0, 0);
	END IF;
END
$sema$;

-- force_release revokes the live lease p_id of p_name, or all of them if
-- p_id is '', and answers them ("holder" rows). With p_now their permits
-- go to the queue at once; else they stay taken (holds) until the leases
-- expire or their holders release them. A revoked lease stays until its
-- expiry.
CREATE OR REPLACE FUNCTION {{force_release}}(p_name text, p_id text, p_channel text, p_now boolean)
RETURNS SETOF {{row}}
LANGUAGE plpgsql AS $sema$
DECLARE
	l       {{leases}}%ROWTYPE;
	v_freed bigint := 0;
BEGIN
	PERFORM FROM {{names}} x WHERE x.name = p_name FOR UPDATE;
	IF NOT FOUND THEN
		RETURN;
	END IF;
	PERFORM {{expire}}(p_name);
	FOR l IN UPDATE {{leases}} x SET revoked = true, holds = NOT p_now
		WHERE x.name = p_name AND (p_id = '' OR x.id = p_id) AND (NOT x.revoked OR x.holds)
		RETURNING x.*
	LOOP
		IF p_now THEN
			v_freed := v_freed + l.weight;
		END IF;
		RETURN NEXT {{lease_row}}('holder', l, 0);
	END LOOP;
	IF v_freed > 0 THEN
		UPDATE {{names}} x SET used = x.used - v_freed WHERE x.name = p_name;
	END IF;
	RETURN QUERY SELECT * FROM {{grant_waiters}}(p_name, p_channel);
END
$sema$;

-- inspect lists the live holders and waiters of p_name, or of every name
-- starting with p_name if p_prefix: by name, holders by token, then
-- waiters in arrival order. It locks nothing.
CREATE OR REPLACE FUNCTION {{inspect}}(p_name text, p_prefix boolean)
RETURNS SETOF {{row}}
LANGUAGE plpgsql STABLE AS $sema$
BEGIN
	IF p_prefix THEN
		RETURN QUERY
		SELECT ({{lease_row}}(CASE WHEN x.revoked THEN 'forced' ELSE 'holder' END, x, n.lim)).*
		FROM {{leases}} x JOIN {{names}} n ON n.name = x.name
		WHERE starts_with(x.name, p_name) AND (NOT x.revoked OR x.holds) AND x.expires_at > now()
		UNION ALL
		SELECT 'waiter', q.name, q.id, q.owner, q.host, q.pid, q.weight, q.ticket, n.lim, 0::bigint,
			{{us}}(q.since), 0::bigint, {{us}}(q.expires_at)
		FROM {{waiters}} q JOIN {{names}} n ON n.name = q.name
		WHERE starts_with(q.name, p_name) AND q.expires_at > now()
		ORDER BY 2, 1, 8;
	ELSE
		RETURN QUERY
		SELECT ({{lease_row}}(CASE WHEN x.revoked THEN 'forced' ELSE 'holder' END, x, n.lim)).*
		FROM {{leases}} x JOIN {{names}} n ON n.name = x.name
		WHERE x.name = p_name AND (NOT x.revoked OR x.holds) AND x.expires_at > now()
		UNION ALL
		SELECT 'waiter', q.name, q.id, q.owner, q.host, q.pid, q.weight, q.ticket, n.lim, 0::bigint,
			{{us}}(q.since), 0::bigint, {{us}}(q.expires_at)
		FROM {{waiters}} q JOIN {{names}} n ON n.name = q.name
		WHERE q.name = p_name AND q.expires_at > now()
		ORDER BY 2, 1, 8;
	END IF;
END
$sema$;

-- sweep deletes the rows of names nobody holds or waits for, after their
-- expired leases and waiters: at most p_max names, skipping those another
-- step has locked. It answers how many rows of names it deleted.
CREATE OR REPLACE FUNCTION {{sweep}}(p_max integer) RETURNS bigint
LANGUAGE plpgsql SET enable_bitmapscan = off AS $sema$
DECLARE
	v_name text;
	v_gone bigint;
	v_n    bigint := 0;
BEGIN
	FOR v_name IN SELECT x.name FROM {{names}} x
		WHERE NOT EXISTS (SELECT 1 FROM {{leases}} l WHERE l.name = x.name AND l.expires_at > now())
			AND NOT EXISTS (SELECT 1 FROM {{waiters}} q WHERE q.name = x.name AND q.expires_at > now())
		LIMIT p_max FOR UPDATE OF x SKIP LOCKED
	LOOP
		PERFORM {{expire}}(v_name);
		WITH d AS (DELETE FROM {{waiters}} x WHERE x.name = v_name AND x.expires_at <= now() RETURNING 1)
		SELECT count(*) INTO v_gone FROM d;
		IF v_gone > 0 THEN
			UPDATE {{names}} x SET waiting = x.waiting - v_gone WHERE x.name = v_name;
		END IF;
		IF NOT EXISTS (SELECT 1 FROM {{leases}} x WHERE x.name = v_name)
			AND NOT EXISTS (SELECT 1 FROM {{waiters}} x WHERE x.name = v_name) THEN
			DELETE FROM {{names}} x WHERE x.name = v_name;
			v_n := v_n + 1;
		END IF;
	END LOOP;
	PERFORM {{lazy}}();
	RETURN v_n;
END
$sema$;
