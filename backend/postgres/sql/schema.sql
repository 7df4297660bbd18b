-- The tables of one sema installation (schema version 3; migrate.go
-- upgrades versions 1 and 2). {{names}} and the like are quoted
-- identifiers made from Config.Schema and Config.TablePrefix. Every
-- statement runs in one transaction under a transaction-scoped advisory
-- lock (see migrate.go), so that processes starting at once create them
-- once.

-- The counts of the tables are never negative, and limits and weights are
-- at least 1. The columns say so with a domain rather than a CHECK
-- constraint of the table: PostgreSQL reads and plans a table's CHECK
-- constraints again in every statement that writes the table, while a
-- session keeps a domain's, and every step writes the name's row.
CREATE DOMAIN {{count}} AS bigint CHECK (VALUE >= 0);
CREATE DOMAIN {{positive}} AS bigint CHECK (VALUE >= 1);

-- One row per name in use: the limit its holders and waiters agreed on, and
-- the sums of the name's rows: used (the weights of its leases, expired or
-- not, force-released ones excepted unless they hold) and waiting (its queued requests). The
-- row is the name's lock: every step on the name (acquire, release, the
-- waiters' checks, force-release) takes it first, and only then touches the
-- name's leases and waiters, and every step leaves used and waiting exact.
-- They let an acquire that finds the permits free and nobody queued grant
-- without reading the name's leases; as used counts expired leases too, it
-- can only err towards the careful path, which expires them and counts
-- again. The rows of names nobody holds or waits for are swept.
CREATE TABLE {{names}} (
	name    text COLLATE "C" PRIMARY KEY,
	lim     {{positive}} NOT NULL,
	used    {{count}} NOT NULL DEFAULT 0,
	waiting {{count}} NOT NULL DEFAULT 0
);

-- One row per lease. Expiry is judged by the database's clock only. A
-- force-released lease stays, revoked, until its expiry, so that its
-- holder's next renewal learns why it ended; while holds is set its
-- permits stay taken (they count in used) until then, or until its holder
-- releases it.
CREATE TABLE {{leases}} (
	name        text COLLATE "C" NOT NULL,
	id          text COLLATE "C" NOT NULL,
	token       bigint NOT NULL,
	owner       text NOT NULL,
	weight      {{positive}} NOT NULL,
	host        text NOT NULL,
	pid         integer NOT NULL,
	acquired_at timestamptz NOT NULL,
	renewed_at  timestamptz NOT NULL,
	expires_at  timestamptz NOT NULL,
	revoked     boolean NOT NULL DEFAULT false,
	holds       boolean NOT NULL DEFAULT false,
	PRIMARY KEY (name, id)
);
-- Expired leases, and a name's earliest expiry, are found without walking
-- the name's other leases (nor the index entries of its deleted ones).
CREATE INDEX {{leases_expiry}} ON {{leases}} (name, expires_at);

-- One row per queued request, in arrival order (ticket). A waiter's row has
-- a short lease of its own, renewed by its client while it waits: a waiter
-- that died leaves the queue when it expires.
CREATE TABLE {{waiters}} (
	name       text COLLATE "C" NOT NULL,
	id         text COLLATE "C" NOT NULL,
	ticket     bigint GENERATED ALWAYS AS IDENTITY,
	owner      text NOT NULL,
	weight     {{positive}} NOT NULL,
	host       text NOT NULL,
	pid        integer NOT NULL,
	ttl_us     bigint NOT NULL,
	since      timestamptz NOT NULL,
	expires_at timestamptz NOT NULL,
	channel    text NOT NULL, -- the NOTIFY channel of the waiting process
	PRIMARY KEY (name, id)
);
CREATE INDEX {{waiters_order}} ON {{waiters}} (name, ticket);

-- Fencing tokens: one sequence for every name, so that tokens never go back
-- for a name whose row was swept, nor after a restart or a crash (a
-- sequence's increments are logged ahead).
CREATE SEQUENCE {{tokens}} AS bigint MINVALUE 1 NO CYCLE;

-- What every function returns: one row per grant, holder or waiter, or one
-- status row. kind says which; the columns that do not apply are zero or
-- empty. Times are microseconds since the Unix epoch, by the database's
-- clock.
CREATE TYPE {{row}} AS (
	kind   text,
	name   text,
	id     text,
	owner  text,
	host   text,
	pid    integer,
	weight bigint,
	token  bigint,  -- a lease's token; a waiter's ticket
	lim    bigint,
	n      bigint,  -- waiters (held); microseconds until the next expiry that matters (queued), -1 if none
	t1     bigint, -- acquired_at, or a waiter's since
	t2     bigint, -- renewed_at
	t3     bigint  -- expires_at
);
