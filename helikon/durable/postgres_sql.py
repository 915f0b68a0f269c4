"""The PostgreSQL store's schema, its migrations and its statements, as SQL text.

`MIGRATIONS[n]` takes a database from schema version n to n + 1; a database opened by this
helikon is migrated forward to `SCHEMA_VERSION` (under an advisory lock, so two workers
starting at once migrate it once), and one of a newer version is refused.

The tables are those of the SQLite store, column for column. JSON is kept as TEXT, never
JSONB: a row's signature is over its exact text, which JSONB would normalize. Times are
seconds since the epoch (DOUBLE PRECISION) on the database server's clock (`NOW`), the one
clock every worker shares, so leases never depend on a worker's clock. Tables are made
unqualified, in the first schema of the connection's `search_path`.
"""

from __future__ import annotations

SCHEMA_VERSION = 2

NOW = "extract(epoch FROM now())::float8"
"""The store's clock: the database server's time at the start of the transaction."""

MIGRATION_LOCK = 0x68656C696B6F6E
"""The advisory lock a migration holds (the bytes of "helikon")."""
SESSION_LOCK = 0x686B
"""The advisory lock class of sessions: (SESSION_LOCK, hashtext(session_id))."""

META = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
LOCK_SCHEMA = "SELECT pg_advisory_xact_lock(%s)"
SCHEMA = "SELECT value FROM meta WHERE key = 'schema'"
SET_SCHEMA = """
INSERT INTO meta (key, value) VALUES ('schema', %s)
ON CONFLICT (key) DO UPDATE SET value = excluded.value
"""
PUT_KEY = "INSERT INTO meta (key, value) VALUES ('key', %s) ON CONFLICT (key) DO NOTHING"
KEY = "SELECT value FROM meta WHERE key = 'key'"

MIGRATIONS: tuple[str, ...] = (
    # 0 -> 1: the first schema.
    """
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        header TEXT NOT NULL,
        header_mac TEXT NOT NULL,
        agent TEXT NOT NULL,
        parent_run_id TEXT,
        session_id TEXT,
        status TEXT NOT NULL,
        phase TEXT NOT NULL,
        head_seq BIGINT NOT NULL,
        head_mac TEXT NOT NULL,
        turns BIGINT NOT NULL,
        lease_owner TEXT,
        lease_epoch BIGINT NOT NULL,
        lease_expires DOUBLE PRECISION,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        forked_from TEXT,
        forked_at BIGINT,
        head_sig TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX runs_by_status ON runs (status, updated_at);
    CREATE INDEX runs_by_parent ON runs (parent_run_id);
    CREATE TABLE records (
        run_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        data TEXT NOT NULL,
        mac TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    CREATE TABLE effects (
        run_id TEXT NOT NULL,
        n BIGINT NOT NULL,
        after_seq BIGINT NOT NULL,
        data TEXT NOT NULL,
        mac TEXT NOT NULL,
        PRIMARY KEY (run_id, n)
    );
    CREATE TABLE calls (
        run_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        call_id TEXT NOT NULL,
        tool TEXT NOT NULL,
        arguments_hash TEXT NOT NULL,
        result TEXT,
        mac TEXT NOT NULL,
        PRIMARY KEY (run_id, seq, call_id)
    );
    CREATE TABLE decisions (
        run_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        call_id TEXT NOT NULL,
        data TEXT NOT NULL,
        mac TEXT NOT NULL,
        PRIMARY KEY (run_id, seq, call_id)
    );
    CREATE TABLE charts (digest TEXT PRIMARY KEY, data TEXT NOT NULL);
    CREATE TABLE sessions (
        session_id TEXT NOT NULL,
        n BIGINT NOT NULL,
        item TEXT NOT NULL,
        mac TEXT NOT NULL,
        run_id TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (session_id, n)
    );
    """,
    # 1 -> 2: one hash chain per run over every row it owns, one per session over its items
    # (`helikon.durable.chain`): each row gets its link number, and its `mac` holds its
    # link's digest; the run's row keeps the chain's head. The rows written before are
    # chained by `helikon.durable.legacy` in the same transaction, then `GUARDS`.
    # Payloads a run keeps by reference (helikon.durable.payloads), keyed by their run and
    # the sha256 of their bytes, get their table.
    """
    ALTER TABLE runs ADD COLUMN chain_n BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN chain_digest TEXT NOT NULL DEFAULT '';
    ALTER TABLE records ADD COLUMN link BIGINT;
    ALTER TABLE effects ADD COLUMN link BIGINT;
    ALTER TABLE calls ADD COLUMN link BIGINT;
    ALTER TABLE calls ADD COLUMN result_link BIGINT;
    ALTER TABLE decisions ADD COLUMN link BIGINT;
    CREATE TABLE session_heads (
        session_id TEXT PRIMARY KEY,
        first BIGINT NOT NULL,
        base TEXT NOT NULL,
        n BIGINT NOT NULL,
        digest TEXT NOT NULL,
        sig TEXT NOT NULL
    );
    CREATE TABLE payloads (
        run_id TEXT NOT NULL,
        digest TEXT NOT NULL,
        data BYTEA NOT NULL,
        PRIMARY KEY (run_id, digest)
    );
    """,
)
CHAINED_AT = 2
"""The schema version whose migration chains the rows written before it."""

GUARD = "helikon_schema_2_refuses_writers_of_schema_1"
"""A helikon of schema 1 still running when another migrated the database writes rows
without links: these constraints refuse its writes, naming both versions. (It cannot be
told otherwise: it checks the version when it opens the store, not at each write.)
NOT VALID: rows a migration left unchained (they did not check out) are not checked."""
GUARDS = tuple(
    f"ALTER TABLE {table} ADD CONSTRAINT {GUARD} CHECK ({check}) NOT VALID"
    for table, check in (
        ("runs", "chain_n > 0"),
        ("records", "link IS NOT NULL"),
        ("effects", "link IS NOT NULL"),
        ("calls", "link IS NOT NULL AND (result IS NULL OR result_link IS NOT NULL)"),
        ("decisions", "link IS NOT NULL"),
    )
)

# ---------------------------------------------------------------- the dialect
# The names `helikon.durable.sql_writes`, `sql_reads` and `sql_sessions` run, as
# `sqlite_sql` holds them.

MARK = "%s"
"""The placeholder of a positional parameter."""

PUT_CHART = "INSERT INTO charts (digest, data) VALUES (%s, %s) ON CONFLICT (digest) DO NOTHING"

CREATE_RUN = f"""
INSERT INTO runs (run_id, header, header_mac, agent, parent_run_id, session_id, status, phase,
                  head_seq, head_mac, turns, lease_owner, lease_epoch, lease_expires,
                  created_at, updated_at, forked_from, forked_at, head_sig, chain_n,
                  chain_digest)
VALUES (%(run_id)s, %(header)s, %(header_mac)s, %(agent)s, %(parent_run_id)s, %(session_id)s,
        'running', %(phase)s, %(head_seq)s, %(head_mac)s, %(turns)s, %(lease_owner)s, 1,
        {NOW} + %(ttl)s, {NOW}, {NOW}, %(forked_from)s, %(forked_at)s, %(head_sig)s,
        %(chain_n)s, %(chain_digest)s)
ON CONFLICT (run_id) DO NOTHING
RETURNING lease_expires
"""

LEASE = "SELECT lease_owner, lease_epoch, lease_expires FROM runs WHERE run_id = %s FOR UPDATE"

CLAIM = f"""
UPDATE runs SET lease_owner = %(owner)s, lease_epoch = lease_epoch + 1,
                lease_expires = {NOW} + %(ttl)s, updated_at = {NOW}
WHERE run_id = %(run_id)s AND (lease_owner IS NULL OR lease_expires < {NOW} OR %(force)s)
RETURNING lease_epoch, lease_expires
"""

RENEW = f"""
UPDATE runs SET lease_expires = {NOW} + %(ttl)s
WHERE run_id = %(run_id)s AND lease_owner = %(owner)s AND lease_epoch = %(epoch)s
RETURNING lease_expires
"""

# The compare and swap: the caller's lease, and the head one before the new record.
ADVANCE = f"""
UPDATE runs SET head_seq = %(head_seq)s, head_mac = %(head_mac)s, head_sig = %(head_sig)s,
                chain_n = %(chain_n)s, chain_digest = %(chain_digest)s, status = %(status)s,
                phase = %(phase)s, turns = GREATEST(turns, %(turns)s), updated_at = {NOW},
                lease_owner = CASE WHEN %(ended)s THEN NULL ELSE lease_owner END,
                lease_expires = CASE WHEN %(ended)s THEN NULL ELSE lease_expires END
WHERE run_id = %(run_id)s AND lease_owner = %(owner)s AND lease_epoch = %(epoch)s
AND head_seq = %(before_seq)s AND head_mac = %(before_mac)s
"""

# A claim waits for this lock: a write under the lease commits before the lease moves. It
# is FOR UPDATE: every write extends the run's one chain, so the writes of a run take turns.
HOLDS = """
SELECT head_seq, head_mac, chain_n, chain_digest FROM runs
WHERE run_id = %(run_id)s AND lease_owner = %(owner)s AND lease_epoch = %(epoch)s FOR UPDATE
"""
CHAIN = """
SELECT head_seq, head_mac, chain_n, chain_digest FROM runs WHERE run_id = %s FOR UPDATE
"""
SET_CHAIN = "UPDATE runs SET chain_n = %s, chain_digest = %s, head_sig = %s WHERE run_id = %s"
HOLDER = "SELECT lease_owner, lease_epoch FROM runs WHERE run_id = %s"

RELEASE = f"""
UPDATE runs SET lease_owner = NULL, lease_expires = NULL, status = %(status)s,
                updated_at = {NOW}
WHERE run_id = %(run_id)s AND lease_owner = %(owner)s AND lease_epoch = %(epoch)s
"""

INSERT_RECORD = """
INSERT INTO records (run_id, seq, data, mac, link)
VALUES (%(run_id)s, %(seq)s, %(data)s, %(mac)s, %(link)s)
"""
NEXT_EFFECT = "SELECT COALESCE(MAX(n), 0) + 1 FROM effects WHERE run_id = %s"
INSERT_EFFECT = """
INSERT INTO effects (run_id, n, after_seq, data, mac, link) VALUES (%s, %s, %s, %s, %s, %s)
"""
START_CALL = """
INSERT INTO calls (run_id, seq, call_id, tool, arguments_hash, result, mac, link)
VALUES (%(run_id)s, %(seq)s, %(call_id)s, %(tool)s, %(arguments_hash)s, NULL, %(mac)s,
        %(link)s)
ON CONFLICT (run_id, seq, call_id) DO NOTHING
"""
FINISH_CALL = """
UPDATE calls SET result = %(result)s, mac = %(mac)s, result_link = %(link)s
WHERE run_id = %(run_id)s AND seq = %(seq)s AND call_id = %(call_id)s AND result IS NULL
"""
INSERT_DECISION = """
INSERT INTO decisions (run_id, seq, call_id, data, mac, link)
VALUES (%(run_id)s, %(seq)s, %(call_id)s, %(data)s, %(mac)s, %(link)s)
ON CONFLICT (run_id, seq, call_id) DO NOTHING
"""

INFO = """run_id, agent, phase, head_seq, status, turns, updated_at, created_at, parent_run_id,
       lease_owner, lease_expires, forked_from, forked_at"""
"""The columns of a `RunInfo` (`sql_reads.info`)."""
RUN_ROW = f"""
SELECT {INFO}, header, header_mac, head_mac, head_sig, chain_n, chain_digest FROM runs
WHERE run_id = %s
"""
RUN_LIST = f"SELECT {INFO} FROM runs"
RUN_ORDER = " ORDER BY updated_at DESC, run_id"
RECORDS = "SELECT seq, data, mac, link FROM records WHERE run_id = %s ORDER BY seq"
EFFECTS = "SELECT n, after_seq, data, mac, link FROM effects WHERE run_id = %s ORDER BY n"
REVISION = """
SELECT head_seq, updated_at, (SELECT MAX(n) FROM effects WHERE run_id = %s)
FROM runs WHERE run_id = %s
"""
CALLS = """
SELECT seq, call_id, tool, arguments_hash, result, mac, link, result_link FROM calls
WHERE run_id = %s ORDER BY seq, call_id
"""
DECISIONS = """
SELECT seq, call_id, data, mac, link FROM decisions WHERE run_id = %s ORDER BY seq, call_id
"""
PARTS = (RECORDS, EFFECTS, CALLS, DECISIONS)
"""A run's rows, each query of the run's id, as `rows.read_rows` takes them."""
CHART = "SELECT data FROM charts WHERE digest = %s"

# ---------------------------------------------------------------- sessions

SESSION_LOCK_TAKE = "SELECT pg_advisory_xact_lock(%s, hashtext(%s))"
SESSION_ITEMS = "SELECT n, item, mac FROM sessions WHERE session_id = %s ORDER BY n"
SESSION_HEAD = "SELECT first, base, n, digest, sig FROM session_heads WHERE session_id = %s"
SESSION_SET_HEAD = """
INSERT INTO session_heads (session_id, first, base, n, digest, sig)
VALUES (%s, %s, %s, %s, %s, %s)
ON CONFLICT (session_id) DO UPDATE SET first = excluded.first, base = excluded.base,
    n = excluded.n, digest = excluded.digest, sig = excluded.sig
"""
SESSION_ADD = f"""
INSERT INTO sessions (session_id, n, item, mac, run_id, created_at)
VALUES (%(session_id)s, %(n)s, %(item)s, %(mac)s, %(run_id)s, {NOW})
"""
SESSION_CLEAR = (
    "DELETE FROM sessions WHERE session_id = %s",
    "DELETE FROM session_heads WHERE session_id = %s",
)

# ---------------------------------------------------------------- retention

# A run with every run nested in it, at any depth (UNION: a forged cycle still ends).
TREE = """
WITH RECURSIVE tree (run_id) AS (
    SELECT run_id FROM runs WHERE run_id = %s
    UNION
    SELECT runs.run_id FROM runs JOIN tree ON runs.parent_run_id = tree.run_id
)
SELECT run_id FROM tree
"""
# Runs not updated for %s seconds, that are not nested in another and no live driver
# holds, with their nested runs.
OLD_TREES = f"""
WITH RECURSIVE tree (run_id) AS (
    SELECT run_id FROM runs WHERE updated_at < {NOW} - %s AND parent_run_id IS NULL
    AND (lease_owner IS NULL OR lease_expires < {NOW})
    UNION
    SELECT runs.run_id FROM runs JOIN tree ON runs.parent_run_id = tree.run_id
)
SELECT run_id FROM tree
"""
DELETE_RUN = tuple(
    f"DELETE FROM {table} WHERE run_id = %s"
    for table in ("records", "effects", "calls", "decisions", "payloads", "runs")
)
"""One run's rows, its own last."""
OLD_SESSIONS = f"""
SELECT session_id, MAX(n) FROM sessions WHERE created_at < {NOW} - %s GROUP BY session_id
"""
SESSION_ITEM = "SELECT mac FROM sessions WHERE session_id = %s AND n = %s"
SESSION_PRUNE = "DELETE FROM sessions WHERE session_id = %s AND n <= %s"

# ---------------------------------------------------------------- chaining (schema 1 -> 2)
# The rows of format 1 as it read them, and the links and digests they get, each of the
# run's id last (`helikon.durable.sql_migrate`).

LEGACY_RUNS = "SELECT run_id, head_seq, head_mac, head_sig FROM runs ORDER BY run_id"
LEGACY_READS = (
    "SELECT seq, data, mac FROM records WHERE run_id = %s ORDER BY seq",
    "SELECT n, after_seq, data, mac FROM effects WHERE run_id = %s ORDER BY n",
    "SELECT seq, call_id, tool, arguments_hash, result, mac FROM calls WHERE run_id = %s "
    "ORDER BY seq, call_id",
    "SELECT seq, call_id, data, mac FROM decisions WHERE run_id = %s ORDER BY seq, call_id",
)
CHAINS = (
    "UPDATE records SET link = %s, mac = %s WHERE seq = %s AND run_id = %s",
    "UPDATE effects SET link = %s, mac = %s WHERE n = %s AND run_id = %s",
    "UPDATE calls SET link = %s, result_link = %s, mac = %s WHERE seq = %s AND call_id = %s "
    "AND run_id = %s",
    "UPDATE decisions SET link = %s, mac = %s WHERE seq = %s AND call_id = %s AND run_id = %s",
)
CHAIN_RUN = """
UPDATE runs SET head_mac = %s, chain_n = %s, chain_digest = %s, head_sig = %s WHERE run_id = %s
"""
LEGACY_SESSIONS = "SELECT DISTINCT session_id FROM sessions"
CHAIN_ITEM = "UPDATE sessions SET mac = %s WHERE n = %s AND session_id = %s"


PUT_PAYLOAD = """
INSERT INTO payloads (run_id, digest, data) VALUES (%s, %s, %s)
ON CONFLICT (run_id, digest) DO NOTHING
"""
PAYLOAD = "SELECT data FROM payloads WHERE run_id = %s AND digest = %s"
