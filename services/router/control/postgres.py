"""PostgreSQL for the router's shared state (`lifecycle.postgres_dsn`): one connection per store,
transactions, reconnection, and the schema's migrations.

Migrations are numbered SQL scripts (`MIGRATIONS`), applied in order at connect, each once, in one
transaction under an advisory lock, so that replicas starting together never apply one twice. The
applied ones are listed in `auditmesh_schema_migrations`. Add a migration by appending to the tuple;
never edit an applied one.

Example::

    db = PgConnection("postgresql://auditmesh@db:5432/auditmesh")
    with db.transaction() as cursor:
        cursor.execute("SELECT 1")
    db.close()
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any, Callable, Iterator, Sequence, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Serialises migrations across replicas (an arbitrary constant: "auditmesh" as a number).
MIGRATION_LOCK = 0x617564_69746D
#: How long a connection attempt may take.
CONNECT_TIMEOUT_S = 5
#: Every connection: TCP keepalive and a user timeout, so that a PostgreSQL gone without a word (a
#: failover, a partition) is noticed within ~15-25 s instead of the kernel's ~15 minutes; statements and
#: lock waits bounded, so no caller (an admin call, a reload, the audit writer) hangs on the database.
CONNECTION_SETTINGS: dict[str, Any] = {
    "connect_timeout": CONNECT_TIMEOUT_S, "keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5,
    "keepalives_count": 3, "tcp_user_timeout": 15_000,
    "options": "-c statement_timeout=10000 -c lock_timeout=5000 -c idle_in_transaction_session_timeout=60000",
}


class PostgresUnavailableError(RuntimeError):
    """PostgreSQL could not be reached; the message names the server but never the password."""


def describe_dsn(dsn: str) -> str:
    """`user@host:port/dbname` of a DSN, without its password (for logs and errors)."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<a DSN that does not parse>"
    return (f"{parts.get('user', '')}@{parts.get('host', 'localhost')}:{parts.get('port', 5432)}/"
            f"{parts.get('dbname', '')}").lstrip("@")


def redact(text: str, dsn: str) -> str:
    """`text` with the DSN's password (if any) replaced by ***."""
    try:
        password = str(conninfo_to_dict(dsn).get("password") or "")
    except psycopg.ProgrammingError:
        return "<redacted: the DSN does not parse>"
    return text.replace(password, "***") if password else text


def open_connection(dsn: str, **settings: Any) -> psycopg.Connection[Any]:
    """A connection with CONNECTION_SETTINGS (and `settings`); PostgresUnavailableError, naming the server
    without the password, when it cannot be made."""
    try:
        return psycopg.connect(dsn, **{**CONNECTION_SETTINGS, **settings})
    except psycopg.Error as error:
        raise PostgresUnavailableError(f"cannot connect to PostgreSQL at {describe_dsn(dsn)}: "
                                       f"{redact(str(error), dsn)}") from None

MIGRATIONS: tuple[str, ...] = (
    # 1: the policy store (services/router/control/store.py's data model) and the audit log.
    """
    CREATE TABLE policy_versions (
        kind TEXT NOT NULL, name TEXT NOT NULL, version TEXT NOT NULL, content TEXT NOT NULL,
        content_hash TEXT NOT NULL, author TEXT NOT NULL, comment TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL, seq BIGSERIAL NOT NULL,
        PRIMARY KEY (kind, name, version));
    CREATE TABLE policy_pointers (
        kind TEXT NOT NULL, name TEXT NOT NULL, scope TEXT NOT NULL, version TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL, author TEXT NOT NULL, PRIMARY KEY (kind, name, scope));
    CREATE TABLE policy_pointer_log (
        seq BIGSERIAL PRIMARY KEY, kind TEXT NOT NULL, name TEXT NOT NULL, scope TEXT NOT NULL,
        version TEXT NOT NULL, previous TEXT NOT NULL, author TEXT NOT NULL, reason TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL);
    CREATE INDEX policy_pointer_log_key ON policy_pointer_log (kind, name, scope, seq);
    CREATE TABLE policy_canaries (
        policy TEXT NOT NULL, scope TEXT NOT NULL, spec TEXT NOT NULL, PRIMARY KEY (policy, scope));
    CREATE TABLE policy_file_imports (
        path TEXT PRIMARY KEY, content_hash TEXT NOT NULL, at DOUBLE PRECISION NOT NULL);
    CREATE TABLE policy_meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL);
    INSERT INTO policy_meta (key, value) VALUES ('generation', 0);
    CREATE TABLE audit_records (
        seq BIGSERIAL PRIMARY KEY, audit_id TEXT NOT NULL UNIQUE, tenant TEXT NOT NULL,
        time DOUBLE PRECISION NOT NULL, record TEXT, record_zlib BYTEA,
        CHECK ((record IS NULL) <> (record_zlib IS NULL)));
    CREATE INDEX audit_records_tenant_time ON audit_records (tenant, time, seq);
    CREATE INDEX audit_records_tenant_seq ON audit_records (tenant, seq);
    CREATE INDEX audit_records_time ON audit_records (time);
    """,
    # 2: reviewers' labels and review tasks (services/router/control/labels_postgres.py, reviews_postgres.py).
    """
    CREATE TABLE labels (
        tenant TEXT NOT NULL, item_id TEXT NOT NULL, text TEXT NOT NULL, labels TEXT NOT NULL,
        reviewer TEXT NOT NULL, labelled_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (tenant, item_id));
    CREATE TABLE review_tasks (
        seq BIGSERIAL PRIMARY KEY, task_id TEXT NOT NULL, tenant TEXT NOT NULL, created DOUBLE PRECISION NOT NULL,
        reason TEXT NOT NULL, record TEXT NOT NULL, lease_until DOUBLE PRECISION NOT NULL DEFAULT 0,
        deliveries INTEGER NOT NULL DEFAULT 0, UNIQUE (tenant, task_id));
    CREATE INDEX review_tasks_by_tenant ON review_tasks (tenant, lease_until, seq);
    CREATE INDEX review_tasks_by_age ON review_tasks (created);
    """,
    # 3: appeals of decisions (services/router/control/appeals.py, labels_postgres.py).
    """
    CREATE TABLE appeals (
        appeal_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, audit_id TEXT NOT NULL, item_id TEXT NOT NULL,
        appellant TEXT NOT NULL, statement TEXT NOT NULL, submitted_at DOUBLE PRECISION NOT NULL, status TEXT NOT NULL,
        reviewer TEXT NOT NULL, note TEXT NOT NULL, resolved_at DOUBLE PRECISION NOT NULL);
    CREATE INDEX appeals_by_decision ON appeals (tenant, audit_id);
    """,
    # 4: banks of known content, shared by router replicas (BankAdmin) and match services (services/match/banks_postgres.py).
    """
    CREATE TABLE match_banks (
        name TEXT PRIMARY KEY, spec TEXT NOT NULL, version BIGINT NOT NULL, updated DOUBLE PRECISION NOT NULL,
        epoch BIGINT NOT NULL, removed_at BIGINT NOT NULL DEFAULT 0);
    CREATE TABLE match_entries (
        bank TEXT NOT NULL, signal TEXT NOT NULL, value TEXT NOT NULL, content_id TEXT NOT NULL,
        added BIGINT NOT NULL, PRIMARY KEY (bank, signal, value));
    CREATE INDEX match_entries_content ON match_entries (bank, content_id);
    CREATE INDEX match_entries_added ON match_entries (bank, added);
    CREATE TABLE match_meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL);
    INSERT INTO match_meta (key, value) VALUES ('generation', 0);
    """,
)


class PgConnection:
    """One PostgreSQL connection used by one thread at a time; reopened after it breaks."""

    def __init__(self, dsn: str, *, migrate: bool = True) -> None:
        self.dsn = dsn
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False
        with self._lock:
            conn = self._connect()
            if migrate:
                apply_migrations(conn)

    def _connect(self) -> psycopg.Connection[Any]:
        if self._closed:
            raise psycopg.OperationalError("the PostgreSQL connection was closed (the router is stopping)")
        if self._conn is None or self._conn.closed or self._conn.broken:
            if self._conn is not None:
                log.warning("postgres: reconnecting after a broken connection")
            self._conn = open_connection(self.dsn)
        return self._conn

    @contextlib.contextmanager
    def transaction(self) -> Iterator[psycopg.Cursor[Any]]:
        """A cursor inside one transaction (committed on exit, rolled back on an exception)."""
        with self._lock:
            conn = self._connect()
            with conn.transaction(), conn.cursor() as cursor:
                yield cursor

    def retrying(self, work: Callable[[psycopg.Cursor[Any]], T]) -> T:
        """`work(cursor)` in one transaction; on a connection found broken (PostgreSQL restarted or failed
        over while it sat idle) it is reopened and `work` runs once more. Only for work that may run twice:
        reads, and writes whose repetition changes nothing (an ack, a lease)."""
        for attempt in (1, 2):
            try:
                with self.transaction() as cursor:
                    return work(cursor)
            except psycopg.OperationalError:
                if attempt == 2 or self._conn is None or not (self._conn.closed or self._conn.broken):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one read-only statement (`retrying`: reading twice changes nothing)."""
        def read(cursor: psycopg.Cursor[Any]) -> list[tuple[Any, ...]]:
            cursor.execute(sql.encode(), params)
            return cursor.fetchall()
        return self.retrying(read)

    def close(self) -> None:
        """Close the connection for good: a later call raises instead of reconnecting."""
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()


def apply_migrations(conn: psycopg.Connection[Any]) -> int:
    """Apply the migrations `conn`'s database lacks; returns how many were applied."""
    with conn.transaction(), conn.cursor() as cursor:
        cursor.execute("SET LOCAL statement_timeout = 0")  # a migration may take long; it runs once
        cursor.execute("SET LOCAL lock_timeout = 0")
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        cursor.execute("CREATE TABLE IF NOT EXISTS auditmesh_schema_migrations ("
                       "version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
        cursor.execute("SELECT coalesce(max(version), 0) FROM auditmesh_schema_migrations")
        row = cursor.fetchone()
        current = int(row[0]) if row else 0
        if current > len(MIGRATIONS):
            raise RuntimeError(f"the database's schema is at migration {current}, newer than this router's "
                               f"{len(MIGRATIONS)}: upgrade the router")
        for number, script in enumerate(MIGRATIONS[current:], start=current + 1):
            cursor.execute(script.encode())
            cursor.execute("INSERT INTO auditmesh_schema_migrations (version) VALUES (%s)", (number,))
            log.info("postgres: applied migration %d", number)
    return len(MIGRATIONS) - current
