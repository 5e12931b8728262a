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
from typing import Any, Iterator

import psycopg

log = logging.getLogger(__name__)

#: Serialises migrations across replicas (an arbitrary constant: "auditmesh" as a number).
MIGRATION_LOCK = 0x617564_69746D
#: How long a connection attempt may take.
CONNECT_TIMEOUT_S = 5

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
        time DOUBLE PRECISION NOT NULL, record JSONB, record_zlib BYTEA,
        CHECK ((record IS NULL) <> (record_zlib IS NULL)));
    CREATE INDEX audit_records_tenant_time ON audit_records (tenant, time, seq);
    CREATE INDEX audit_records_time ON audit_records (time);
    """,
)


class PgConnection:
    """One PostgreSQL connection used by one thread at a time; reopened after it breaks."""

    def __init__(self, dsn: str, *, migrate: bool = True) -> None:
        self.dsn = dsn
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        with self._lock:
            conn = self._connect()
            if migrate:
                apply_migrations(conn)

    def _connect(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            if self._conn is not None:
                log.warning("postgres: reconnecting after a broken connection")
            self._conn = psycopg.connect(self.dsn, connect_timeout=CONNECT_TIMEOUT_S)
        return self._conn

    @contextlib.contextmanager
    def transaction(self) -> Iterator[psycopg.Cursor[Any]]:
        """A cursor inside one transaction (committed on exit, rolled back on an exception)."""
        with self._lock:
            conn = self._connect()
            with conn.transaction(), conn.cursor() as cursor:
                yield cursor

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()


def apply_migrations(conn: psycopg.Connection[Any]) -> int:
    """Apply the migrations `conn`'s database lacks; returns how many were applied."""
    with conn.transaction(), conn.cursor() as cursor:
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
