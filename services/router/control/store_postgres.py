"""`PolicyStore` in PostgreSQL, shared by every router replica (`lifecycle.postgres_dsn`), and the
notifications that make every replica load a change at once.

The data model is services/router/control/store.py's, one table each (migrations in
services/router/control/postgres.py). Every write that changes what routers serve (a pointer, a
canary) runs in one transaction that first locks the generation row (`SELECT ... FOR UPDATE`), so
concurrent writers are serialised: a pointer's compare-and-set sees the committed state and the
second of two racing activations fails with ConflictError. The same transaction increments the
generation and sends `NOTIFY auditmesh_policy, '<generation>'`, delivered to listeners only if it
commits.

Why the pointers live here rather than in etcd or Redis: a version is stored (immutable) before any
pointer names it, in the same database, so a replica never sees a pointer to a version it cannot read,
and operators run one system of record instead of two. What etcd's watch would add,
prompt notification, PostgreSQL's LISTEN/NOTIFY gives; what it cannot guarantee (a listener whose
connection dropped misses notifications, as Redis pub/sub would) the generation poll covers: every
replica also polls `generation()` each `lifecycle.watch_interval_s`, so a missed notification costs
at most one poll interval, never a stale replica.

Example::

    store = PostgresPolicyStore("postgresql://auditmesh@db/auditmesh")
    feed = PolicyChangeFeed(store.dsn)
    if feed.wait(timeout_s=1.0):       # True: a change was committed (by any replica)
        control.reload()
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import asdict
from typing import Any, Callable

import psycopg

from services.common.errors import ConflictError
from services.router.control.postgres import PgConnection, open_connection
from services.router.control.store import (CanarySpec, Pointer, PointerChange, StoredVersion, canary_from_dict,
                                            same_or_refused)

log = logging.getLogger(__name__)
#: The channel every pointer or canary change is announced on (payload: the new generation).
CHANNEL = "auditmesh_policy"
_VERSION_COLUMNS = "kind, name, version, content, content_hash, author, comment, created_at"


class PostgresPolicyStore:
    """See the module docstring. Blocking; one connection, one thread at a time."""

    def __init__(self, dsn: str, *, clock: Callable[[], float] = time.time) -> None:
        self.dsn = dsn
        self._clock = clock
        self._db = PgConnection(dsn)

    def put_version(self, version: StoredVersion) -> StoredVersion:
        with self._db.transaction() as cursor:
            cursor.execute(f"INSERT INTO policy_versions ({_VERSION_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
                           "ON CONFLICT (kind, name, version) DO NOTHING",
                           (version.kind, version.name, version.version, version.content, version.content_hash,
                            version.author, version.comment, version.created_at))
            if cursor.rowcount == 1:
                return version
            existing = _get(cursor, version.kind, version.name, version.version)
        if existing is None:  # pragma: no cover - a version is never deleted
            raise ConflictError(f"{version.kind}/{version.name}@{version.version} vanished while it was stored")
        return same_or_refused(existing, version)

    def get_version(self, kind: str, name: str, version: str) -> StoredVersion | None:
        rows = self._db.fetch(f"SELECT {_VERSION_COLUMNS} FROM policy_versions WHERE kind = %s AND name = %s "
                              "AND version = %s", (kind, name, version))
        return StoredVersion(*rows[0]) if rows else None

    def list_versions(self, kind: str, name: str = "") -> list[StoredVersion]:
        rows = self._db.fetch(f"SELECT {_VERSION_COLUMNS} FROM policy_versions WHERE kind = %s AND (%s = '' OR name = %s) "
                              "ORDER BY created_at, seq", (kind, name, name))
        return [StoredVersion(*row) for row in rows]

    def set_pointer(self, kind: str, name: str, scope: str, version: str, *, expected: str, author: str,
                    reason: str) -> PointerChange:
        now = self._clock()
        with self._db.transaction() as cursor:
            generation = _lock_generation(cursor)
            cursor.execute("SELECT version FROM policy_pointers WHERE kind = %s AND name = %s AND scope = %s",
                           (kind, name, scope))
            row = cursor.fetchone()
            current = str(row[0]) if row else ""
            if current != expected:
                raise ConflictError(f"{kind}/{name} (scope {scope or 'all tenants'}) changed meanwhile: it points at "
                                    f"{current or 'nothing'!r}, not {expected or 'nothing'!r}; read it again and retry")
            if version:
                cursor.execute("INSERT INTO policy_pointers VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (kind, name, scope) "
                               "DO UPDATE SET version = EXCLUDED.version, updated_at = EXCLUDED.updated_at, "
                               "author = EXCLUDED.author", (kind, name, scope, version, now, author))
            else:
                cursor.execute("DELETE FROM policy_pointers WHERE kind = %s AND name = %s AND scope = %s", (kind, name, scope))
            cursor.execute("INSERT INTO policy_pointer_log (kind, name, scope, version, previous, author, reason, at) "
                           "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING seq",
                           (kind, name, scope, version, current, author, reason, now))
            seq_row = cursor.fetchone()
            _bump(cursor, generation)
        return PointerChange(int(seq_row[0]) if seq_row else 0, kind, name, scope, version, current, author, reason, now)

    def pointers(self) -> list[Pointer]:
        rows = self._db.fetch("SELECT kind, name, scope, version, updated_at, author FROM policy_pointers "
                              "ORDER BY kind, name, scope")
        return [Pointer(*row) for row in rows]

    def history(self, kind: str, name: str, scope: str) -> list[PointerChange]:
        rows = self._db.fetch("SELECT seq, kind, name, scope, version, previous, author, reason, at FROM policy_pointer_log "
                              "WHERE kind = %s AND name = %s AND scope = %s ORDER BY seq", (kind, name, scope))
        return [PointerChange(*row) for row in rows]

    def put_canary(self, spec: CanarySpec) -> None:
        with self._db.transaction() as cursor:
            generation = _lock_generation(cursor)
            cursor.execute("INSERT INTO policy_canaries VALUES (%s, %s, %s) ON CONFLICT (policy, scope) "
                           "DO UPDATE SET spec = EXCLUDED.spec", (spec.policy, spec.scope, json.dumps(asdict(spec))))
            _bump(cursor, generation)

    def stop_canary(self, stopped: CanarySpec) -> bool:
        with self._db.transaction() as cursor:
            generation = _lock_generation(cursor)  # serialises every writer: the check below holds until commit
            cursor.execute("SELECT spec FROM policy_canaries WHERE policy = %s AND scope = %s", (stopped.policy, stopped.scope))
            row = cursor.fetchone()
            current = canary_from_dict(json.loads(row[0])) if row else None
            if current is None or not current.running or current.started_at != stopped.started_at:
                return False
            cursor.execute("UPDATE policy_canaries SET spec = %s WHERE policy = %s AND scope = %s",
                           (json.dumps(asdict(stopped)), stopped.policy, stopped.scope))
            _bump(cursor, generation)
            return True

    def canaries(self) -> list[CanarySpec]:
        rows = self._db.fetch("SELECT spec FROM policy_canaries ORDER BY policy, scope")
        return [canary_from_dict(json.loads(row[0])) for row in rows]

    def generation(self) -> int:
        rows = self._db.fetch("SELECT value FROM policy_meta WHERE key = 'generation'")
        return int(rows[0][0]) if rows else 0

    def file_hash(self, path: str) -> str:
        rows = self._db.fetch("SELECT content_hash FROM policy_file_imports WHERE path = %s", (path,))
        return str(rows[0][0]) if rows else ""

    def set_file_hash(self, path: str, content_hash: str) -> None:
        with self._db.transaction() as cursor:
            cursor.execute("INSERT INTO policy_file_imports VALUES (%s, %s, %s) ON CONFLICT (path) "
                           "DO UPDATE SET content_hash = EXCLUDED.content_hash, at = EXCLUDED.at",
                           (path, content_hash, self._clock()))

    def close(self) -> None:
        self._db.close()


def _get(cursor: psycopg.Cursor[Any], kind: str, name: str, version: str) -> StoredVersion | None:
    cursor.execute(f"SELECT {_VERSION_COLUMNS} FROM policy_versions WHERE kind = %s AND name = %s AND version = %s",
                   (kind, name, version))
    row = cursor.fetchone()
    return StoredVersion(*row) if row else None


def _lock_generation(cursor: psycopg.Cursor[Any]) -> int:
    """Lock the generation row for this transaction (serialises writers) and read it."""
    cursor.execute("SELECT value FROM policy_meta WHERE key = 'generation' FOR UPDATE")
    row = cursor.fetchone()
    return int(row[0]) if row else 0


def _bump(cursor: psycopg.Cursor[Any], generation: int) -> None:
    cursor.execute("UPDATE policy_meta SET value = %s WHERE key = 'generation'", (generation + 1,))
    cursor.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(generation + 1)))


class PolicyChangeFeed:
    """LISTENs on `CHANNEL` on a connection of its own. `wait` blocks (run it in a worker thread)."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._conn: psycopg.Connection[Any] | None = None

    def _listening(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            conn = open_connection(self.dsn, autocommit=True)
            try:
                conn.execute(f"LISTEN {CHANNEL}")
            except BaseException:
                conn.close()
                raise
            self._conn = conn  # only a connection that listens
        return self._conn

    def wait(self, timeout_s: float) -> bool:
        """True as soon as a change is announced, False after `timeout_s` without one. A broken connection
        raises (psycopg.OperationalError); the next call reconnects (what was announced meanwhile is
        missed, and the generation poll catches it)."""
        conn = self._listening()
        try:
            return any(True for _ in conn.notifies(timeout=timeout_s, stop_after=1))
        except psycopg.OperationalError:
            conn.close()
            raise

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


def follow_changes(feed: PolicyChangeFeed, reload: Callable[[], object], stop: threading.Event, *,
                   wait_s: float = 0.5, retry_s: float = 1.0) -> None:
    """Until `stop` is set: wait for announced changes and `reload` at each (a thread's loop). A failing
    connection is logged and retried after `retry_s`; changes missed meanwhile are caught by the
    generation poll. Closes the feed's connection on the way out."""
    try:
        while not stop.is_set():
            try:
                if feed.wait(wait_s):
                    reload()
            except Exception as error:  # noqa: BLE001 - a database or reload error must not end the follower
                log.warning("policy change feed: %s; retrying in %.1f s (the generation poll still runs)", error, retry_s)
                stop.wait(retry_s)
    finally:
        feed.close()
