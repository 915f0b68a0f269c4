"""The SQLite store's schema, its migrations and its statements, as SQL text.

`MIGRATIONS[n]` takes a database from schema version n to n + 1; a database opened by this
helikon is migrated forward to `SCHEMA_VERSION`, and one of a newer version is refused.
"""

from __future__ import annotations

SCHEMA_VERSION = 4
RUN_SPAN = 1 << 32
"""A run's records are keyed `run_key * RUN_SPAN + seq`: one range of one b-tree a run."""

MIGRATIONS: tuple[str, ...] = (
    # 0 -> 1: the first schema.
    """
    CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        header TEXT NOT NULL,
        header_mac TEXT NOT NULL,
        agent TEXT NOT NULL,
        parent_run_id TEXT,
        session_id TEXT,
        status TEXT NOT NULL,
        phase TEXT NOT NULL,
        head_seq INTEGER NOT NULL,
        head_mac TEXT NOT NULL,
        turns INTEGER NOT NULL,
        lease_owner TEXT,
        lease_epoch INTEGER NOT NULL,
        lease_expires REAL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        forked_from TEXT,
        forked_at INTEGER,
        head_sig TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX runs_by_status ON runs (status, updated_at);
    CREATE INDEX runs_by_parent ON runs (parent_run_id);
    CREATE TABLE records (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        data TEXT NOT NULL,
        mac TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE effects (
        run_id TEXT NOT NULL,
        n INTEGER NOT NULL,
        after_seq INTEGER NOT NULL,
        data TEXT NOT NULL,
        mac TEXT NOT NULL,
        PRIMARY KEY (run_id, n)
    ) WITHOUT ROWID;
    CREATE TABLE calls (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        call_id TEXT NOT NULL,
        tool TEXT NOT NULL,
        arguments_hash TEXT NOT NULL,
        result TEXT,
        mac TEXT NOT NULL,
        PRIMARY KEY (run_id, seq, call_id)
    ) WITHOUT ROWID;
    CREATE TABLE decisions (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        call_id TEXT NOT NULL,
        data TEXT NOT NULL,
        mac TEXT NOT NULL,
        PRIMARY KEY (run_id, seq, call_id)
    ) WITHOUT ROWID;
    CREATE TABLE charts (digest TEXT PRIMARY KEY, data TEXT NOT NULL) WITHOUT ROWID;
    CREATE TABLE sessions (
        session_id TEXT NOT NULL,
        n INTEGER NOT NULL,
        item TEXT NOT NULL,
        mac TEXT NOT NULL,
        run_id TEXT,
        created_at REAL NOT NULL,
        PRIMARY KEY (session_id, n)
    ) WITHOUT ROWID;
    """,
    # 1 -> 2: runs are listed by a scan of their table. An index on (status, updated_at)
    # made every write of a record rewrite one more page (its updated_at moves each time).
    """
    DROP INDEX IF EXISTS runs_by_status;
    CREATE TABLE records_v2 (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        data TEXT NOT NULL,
        mac TEXT NOT NULL,
        UNIQUE (run_id, seq)
    );
    INSERT INTO records_v2 (run_id, seq, data, mac)
        SELECT run_id, seq, data, mac FROM records ORDER BY run_id, seq;
    DROP TABLE records;
    ALTER TABLE records_v2 RENAME TO records;
    """,
    # 2 -> 3: a record is one row of one b-tree, keyed by its run's number and its seq, so
    # appending one writes one page, not two (the table's and its (run_id, seq) index's).
    """
    ALTER TABLE runs ADD COLUMN run_key INTEGER;
    UPDATE runs SET run_key = rowid;
    CREATE UNIQUE INDEX runs_by_key ON runs (run_key);
    CREATE TABLE records_v3 (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        data TEXT NOT NULL,
        mac TEXT NOT NULL
    );
    INSERT INTO records_v3 (id, run_id, seq, data, mac)
        SELECT runs.run_key * 4294967296 + records.seq, records.run_id, records.seq,
               records.data, records.mac
        FROM records JOIN runs ON runs.run_id = records.run_id ORDER BY 1;
    DROP TABLE records;
    ALTER TABLE records_v3 RENAME TO records;
    """,
    # 3 -> 4: one hash chain per run over every row it owns, one per session over its items
    # (`helikon.durable.chain`): each row gets its link number, and its `mac` holds its
    # link's digest; the run's row keeps the chain's head. The rows written before are
    # chained by `helikon.durable.legacy` in the same transaction. Payloads a
    # run keeps by reference (helikon.durable.payloads), keyed by their run and the sha256 of
    # their bytes, get their table (a rowid table: its rows are large).
    """
    ALTER TABLE runs ADD COLUMN chain_n INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN chain_digest TEXT NOT NULL DEFAULT '';
    ALTER TABLE records ADD COLUMN link INTEGER;
    ALTER TABLE effects ADD COLUMN link INTEGER;
    ALTER TABLE calls ADD COLUMN link INTEGER;
    ALTER TABLE calls ADD COLUMN result_link INTEGER;
    ALTER TABLE decisions ADD COLUMN link INTEGER;
    CREATE TABLE session_heads (
        session_id TEXT PRIMARY KEY,
        first INTEGER NOT NULL,
        base TEXT NOT NULL,
        n INTEGER NOT NULL,
        digest TEXT NOT NULL,
        sig TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE payloads (
        run_id TEXT NOT NULL,
        digest TEXT NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (run_id, digest)
    );
    """,
)
CHAINED_AT = 4
"""The schema version whose migration chains the rows written before it."""

GUARD = "helikon_schema_4_refuses_writers_of_schema_3"
"""A helikon of schema 3 still running when another migrated the file writes rows without
links: these triggers refuse its writes, naming both versions. (It cannot be told
otherwise: it checks the version when it opens the store, not at each write.)"""
GUARDS = tuple(
    f"CREATE TRIGGER {name} BEFORE {event} WHEN {when} BEGIN SELECT RAISE(ABORT, '{GUARD}'); END"
    for name, event, when in (
        ("runs_need_a_chain", "INSERT ON runs", "NEW.chain_n = 0"),
        ("records_need_a_link", "INSERT ON records", "NEW.link IS NULL"),
        ("effects_need_a_link", "INSERT ON effects", "NEW.link IS NULL"),
        ("calls_need_a_link", "INSERT ON calls", "NEW.link IS NULL"),
        (
            "results_need_a_link",
            "UPDATE OF result ON calls",
            "NEW.result IS NOT NULL AND NEW.result_link IS NULL",
        ),
        ("decisions_need_a_link", "INSERT ON decisions", "NEW.link IS NULL"),
    )
)

# ---------------------------------------------------------------- the dialect
# The names `helikon.durable.sql_writes`, `sql_reads` and `sql_sessions` run, as
# `postgres_sql` holds them.

NOW = "helikon_now()"
"""The store's clock (`sqlite_transactions.now`, registered on the store's connection)."""
MARK = "?"
"""The placeholder of a positional parameter."""

PUT_CHART = "INSERT INTO charts (digest, data) VALUES (?, ?) ON CONFLICT (digest) DO NOTHING"

CREATE_RUN = f"""
INSERT INTO runs (run_id, header, header_mac, agent, parent_run_id, session_id, status, phase,
                  head_seq, head_mac, turns, lease_owner, lease_epoch, lease_expires,
                  created_at, updated_at, forked_from, forked_at, head_sig, chain_n,
                  chain_digest, run_key)
VALUES (:run_id, :header, :header_mac, :agent, :parent_run_id, :session_id, 'running', :phase,
        :head_seq, :head_mac, :turns, :lease_owner, 1, {NOW} + :ttl, {NOW}, {NOW},
        :forked_from, :forked_at, :head_sig, :chain_n, :chain_digest,
        (SELECT COALESCE(MAX(run_key), 0) + 1 FROM runs))
ON CONFLICT (run_id) DO NOTHING
RETURNING lease_expires
"""

LEASE = "SELECT lease_owner, lease_epoch, lease_expires FROM runs WHERE run_id = ?"

CLAIM = f"""
UPDATE runs SET lease_owner = :owner, lease_epoch = lease_epoch + 1,
                lease_expires = {NOW} + :ttl, updated_at = {NOW}
WHERE run_id = :run_id AND (lease_owner IS NULL OR lease_expires < {NOW} OR :force)
RETURNING lease_epoch, lease_expires
"""

RENEW = f"""
UPDATE runs SET lease_expires = {NOW} + :ttl
WHERE run_id = :run_id AND lease_owner = :owner AND lease_epoch = :epoch
RETURNING lease_expires
"""

# The compare and swap: the caller's lease, and the head one before the new record.
ADVANCE = f"""
UPDATE runs SET head_seq = :head_seq, head_mac = :head_mac, head_sig = :head_sig,
                chain_n = :chain_n, chain_digest = :chain_digest, status = :status,
                phase = :phase, turns = MAX(turns, :turns), updated_at = {NOW},
                lease_owner = CASE WHEN :ended THEN NULL ELSE lease_owner END,
                lease_expires = CASE WHEN :ended THEN NULL ELSE lease_expires END
WHERE run_id = :run_id AND lease_owner = :owner AND lease_epoch = :epoch
AND head_seq = :before_seq AND head_mac = :before_mac
"""

HOLDS = """
SELECT head_seq, head_mac, chain_n, chain_digest FROM runs
WHERE run_id = :run_id AND lease_owner = :owner AND lease_epoch = :epoch
"""
CHAIN = "SELECT head_seq, head_mac, chain_n, chain_digest FROM runs WHERE run_id = ?"
SET_CHAIN = "UPDATE runs SET chain_n = ?, chain_digest = ?, head_sig = ? WHERE run_id = ?"
HOLDER = "SELECT lease_owner, lease_epoch FROM runs WHERE run_id = ?"

RELEASE = f"""
UPDATE runs SET lease_owner = NULL, lease_expires = NULL, status = :status,
                updated_at = {NOW}
WHERE run_id = :run_id AND lease_owner = :owner AND lease_epoch = :epoch
"""

INSERT_RECORD = """
INSERT INTO records (id, run_id, seq, data, mac, link)
SELECT run_key * 4294967296 + :seq, :run_id, :seq, :data, :mac, :link FROM runs
WHERE run_id = :run_id
"""
INSERT_EFFECT = """
INSERT INTO effects (run_id, n, after_seq, data, mac, link) VALUES (?, ?, ?, ?, ?, ?)
"""
NEXT_EFFECT = "SELECT COALESCE(MAX(n), 0) + 1 FROM effects WHERE run_id = ?"
START_CALL = """
INSERT INTO calls (run_id, seq, call_id, tool, arguments_hash, result, mac, link)
VALUES (:run_id, :seq, :call_id, :tool, :arguments_hash, NULL, :mac, :link)
ON CONFLICT (run_id, seq, call_id) DO NOTHING
"""
FINISH_CALL = """
UPDATE calls SET result = :result, mac = :mac, result_link = :link
WHERE run_id = :run_id AND seq = :seq AND call_id = :call_id AND result IS NULL
"""
INSERT_DECISION = """
INSERT INTO decisions (run_id, seq, call_id, data, mac, link)
VALUES (:run_id, :seq, :call_id, :data, :mac, :link)
ON CONFLICT (run_id, seq, call_id) DO NOTHING
"""

INFO = """run_id, agent, phase, head_seq, status, turns, updated_at, created_at, parent_run_id,
       lease_owner, lease_expires, forked_from, forked_at"""
"""The columns of a `RunInfo` (`sql_reads.info`)."""
RUN_ROW = f"""
SELECT {INFO}, header, header_mac, head_mac, head_sig, chain_n, chain_digest FROM runs
WHERE run_id = ?
"""
RUN_LIST = f"SELECT {INFO} FROM runs"
RUN_ORDER = " ORDER BY updated_at DESC, run_id"
RECORDS = """
SELECT seq, data, mac, link FROM records
WHERE id BETWEEN (SELECT run_key * 4294967296 FROM runs WHERE run_id = ?1)
             AND (SELECT run_key * 4294967296 + 4294967295 FROM runs WHERE run_id = ?1)
ORDER BY id
"""
EFFECTS = "SELECT n, after_seq, data, mac, link FROM effects WHERE run_id = ? ORDER BY n"
REVISION = """
SELECT head_seq, updated_at, (SELECT MAX(n) FROM effects WHERE run_id = ?)
FROM runs WHERE run_id = ?
"""
CALLS = """
SELECT seq, call_id, tool, arguments_hash, result, mac, link, result_link FROM calls
WHERE run_id = ? ORDER BY seq, call_id
"""
DECISIONS = """
SELECT seq, call_id, data, mac, link FROM decisions WHERE run_id = ? ORDER BY seq, call_id
"""
PARTS = (RECORDS, EFFECTS, CALLS, DECISIONS)
"""A run's rows, each query of the run's id, as `rows.read_rows` takes them."""
CHART = "SELECT data FROM charts WHERE digest = ?"

SESSION_LOCK_TAKE = None
"""Sessions need no lock of their own: a write transaction holds the file."""
SESSION_LOCK = None
SESSION_ITEMS = "SELECT n, item, mac FROM sessions WHERE session_id = ? ORDER BY n"
SESSION_HEAD = "SELECT first, base, n, digest, sig FROM session_heads WHERE session_id = ?"
SESSION_SET_HEAD = """
INSERT OR REPLACE INTO session_heads (session_id, first, base, n, digest, sig)
VALUES (?, ?, ?, ?, ?, ?)
"""
SESSION_ADD = f"""
INSERT INTO sessions (session_id, n, item, mac, run_id, created_at)
VALUES (:session_id, :n, :item, :mac, :run_id, {NOW})
"""
SESSION_CLEAR = (
    "DELETE FROM sessions WHERE session_id = ?",
    "DELETE FROM session_heads WHERE session_id = ?",
)

# A run with every run nested in it, at any depth (UNION: a forged cycle still ends).
TREE = """
WITH RECURSIVE tree (run_id) AS (
    SELECT run_id FROM runs WHERE run_id = ?
    UNION
    SELECT runs.run_id FROM runs JOIN tree ON runs.parent_run_id = tree.run_id
)
SELECT run_id FROM tree
"""
# Runs not updated for ? seconds, that are not nested in another and no live driver holds,
# with their nested runs.
OLD_TREES = f"""
WITH RECURSIVE tree (run_id) AS (
    SELECT run_id FROM runs WHERE updated_at < {NOW} - ? AND parent_run_id IS NULL
    AND (lease_owner IS NULL OR lease_expires < {NOW})
    UNION
    SELECT runs.run_id FROM runs JOIN tree ON runs.parent_run_id = tree.run_id
)
SELECT run_id FROM tree
"""
# One run's rows, its own last (its records are found by its number).
DELETE_RUN = (
    """
    DELETE FROM records WHERE id BETWEEN
        (SELECT run_key * 4294967296 FROM runs WHERE run_id = ?1) AND
        (SELECT run_key * 4294967296 + 4294967295 FROM runs WHERE run_id = ?1)
    """,
    *(
        f"DELETE FROM {table} WHERE run_id = ?"
        for table in ("effects", "calls", "decisions", "payloads", "runs")
    ),
)
OLD_SESSIONS = f"""
SELECT session_id, MAX(n) FROM sessions WHERE created_at < {NOW} - ? GROUP BY session_id
"""
SESSION_ITEM = "SELECT mac FROM sessions WHERE session_id = ? AND n = ?"
SESSION_PRUNE = "DELETE FROM sessions WHERE session_id = ? AND n <= ?"

# ---------------------------------------------------------------- migrating
# What `helikon.durable.sql_migrate` runs. No advisory lock: the migration's write
# transaction holds the file.

LOCK_SCHEMA = None
MIGRATION_LOCK = None
META = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)"
SCHEMA = "SELECT value FROM meta WHERE key = 'schema'"
SET_SCHEMA = "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema', ?)"
PUT_KEY = KEY = None
"""The key is never kept in the file (it is given, or kept in a file beside it)."""

# Chaining (schema 3 -> 4): the rows of format 1 as it read them, and the links and
# digests they get, each of the run's id last.
LEGACY_RUNS = "SELECT run_id, head_seq, head_mac, head_sig FROM runs ORDER BY run_key"
LEGACY_READS = (
    "SELECT seq, data, mac FROM records WHERE id BETWEEN "
    "(SELECT run_key * 4294967296 FROM runs WHERE run_id = ?1) AND "
    "(SELECT run_key * 4294967296 + 4294967295 FROM runs WHERE run_id = ?1) ORDER BY id",
    "SELECT n, after_seq, data, mac FROM effects WHERE run_id = ? ORDER BY n",
    "SELECT seq, call_id, tool, arguments_hash, result, mac FROM calls WHERE run_id = ? "
    "ORDER BY seq, call_id",
    "SELECT seq, call_id, data, mac FROM decisions WHERE run_id = ? ORDER BY seq, call_id",
)
CHAINS = (
    "UPDATE records SET link = ?1, mac = ?2 "
    "WHERE id = (SELECT run_key FROM runs WHERE run_id = ?4) * 4294967296 + ?3",
    "UPDATE effects SET link = ?1, mac = ?2 WHERE run_id = ?4 AND n = ?3",
    "UPDATE calls SET link = ?1, result_link = ?2, mac = ?3 WHERE run_id = ?6 AND seq = ?4 "
    "AND call_id = ?5",
    "UPDATE decisions SET link = ?1, mac = ?2 WHERE run_id = ?5 AND seq = ?3 AND call_id = ?4",
)
CHAIN_RUN = """
UPDATE runs SET head_mac = ?, chain_n = ?, chain_digest = ?, head_sig = ? WHERE run_id = ?
"""
LEGACY_SESSIONS = "SELECT DISTINCT session_id FROM sessions"
CHAIN_ITEM = "UPDATE sessions SET mac = ?1 WHERE n = ?2 AND session_id = ?3"


PUT_PAYLOAD = """
INSERT INTO payloads (run_id, digest, data) VALUES (?, ?, ?)
ON CONFLICT (run_id, digest) DO NOTHING
"""
PAYLOAD = "SELECT data FROM payloads WHERE run_id = ? AND digest = ?"
