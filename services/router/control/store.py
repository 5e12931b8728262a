"""Where policy and tenants versions live: immutable versions, active pointers, canaries. Embedded
default: one SQLite file (`lifecycle.store_path`, default `var/policy_store.sqlite`), so `make run`
needs no server.

The data model is small and chosen so that a shared backend can implement `PolicyStore` directly:

* versions: (kind, name, version) → content, content hash, author, comment, time. Immutable: putting
  an existing id again is a no-op if the content hash matches and `AlreadyExistsError` otherwise.
* pointers: (kind, name, scope) → version, changed only by compare-and-set on the version the caller
  saw (`expected`), and logged (the log is what `Rollback` walks back through).
* canaries: (policy, scope) → the canary's spec and whether it still runs.
* a generation counter, incremented in the same transaction as every pointer or canary change.

How replicas converge (several routers on one store): versions are immutable and content-addressed,
so every replica that reads an id reads the same document. The only mutable state is the pointers
and canaries, each changed atomically with the generation. Each router polls `generation()` (every
`lifecycle.watch_interval_s`; a Redis backend would subscribe to a channel, etcd would watch a key
prefix) and, when it moved, reads all pointers and canaries and builds and swaps a new snapshot off
the request path. So every replica reaches the newest generation within one poll interval plus a
compile, and until then serves a complete older one; responses and audit records name the version,
so the transition is visible. Conflicting writers cannot interleave: the pointer compare-and-set
makes the second of two concurrent activations fail (`ConflictError`, ABORTED) instead of
silently overwriting. An automatic rollback from several replicas at once is the same pointer/canary
write and lands once. SQLite gives this between processes on one host (WAL mode); for many hosts
`PostgresPolicyStore` (services/router/control/store_postgres.py) implements it in PostgreSQL, and
announces each change with NOTIFY so replicas reload at once instead of at their next poll.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from services.common.errors import AlreadyExistsError, ConflictError
from services.router.control.canary import RollbackBounds
from services.router.control.sqlite_wal import open_shared


@dataclass(frozen=True)
class StoredVersion:
    kind: str
    name: str
    version: str
    content: str
    content_hash: str
    author: str
    comment: str
    created_at: float


@dataclass(frozen=True)
class Pointer:
    """The active version of a document in a scope ("" = every tenant, else a tenant id)."""

    kind: str
    name: str
    scope: str
    version: str
    updated_at: float
    author: str


@dataclass(frozen=True)
class PointerChange:
    """One entry of the pointer log. `version` "" = the pointer was removed."""

    seq: int
    kind: str
    name: str
    scope: str
    version: str
    previous: str
    author: str
    reason: str
    at: float


@dataclass(frozen=True)
class CanarySpec:
    """A canary of `candidate` against `baseline` for `policy` in `scope`."""

    policy: str
    scope: str
    baseline: str
    candidate: str
    percent: float
    shadow: bool
    bounds: RollbackBounds
    author: str
    started_at: float
    running: bool = True
    stopped_reason: str = ""

    def __post_init__(self) -> None:
        if not 0.0 < self.percent <= 100.0:
            raise ValueError(f"percent must be in (0, 100], got {self.percent}")


class PolicyStore(Protocol):
    """What the router needs from a store (see the module docstring). All methods are blocking."""

    def put_version(self, version: StoredVersion) -> StoredVersion:
        """Store `version`; returns the stored one (the existing one when identical)."""
        ...

    def get_version(self, kind: str, name: str, version: str) -> StoredVersion | None: ...

    def list_versions(self, kind: str, name: str = "") -> list[StoredVersion]:
        """Versions of one document ("" = every document of `kind`), oldest first."""
        ...

    def set_pointer(self, kind: str, name: str, scope: str, version: str, *, expected: str, author: str,
                    reason: str) -> PointerChange:
        """Point (kind, name, scope) at `version` ("" removes the pointer) if it currently points at
        `expected` ("" = no pointer); else ConflictError."""
        ...

    def pointers(self) -> list[Pointer]: ...

    def history(self, kind: str, name: str, scope: str) -> list[PointerChange]:
        """The pointer log of one (kind, name, scope), oldest first."""
        ...

    def put_canary(self, spec: CanarySpec) -> None:
        """Create or replace the canary of (spec.policy, spec.scope)."""
        ...

    def canaries(self) -> list[CanarySpec]: ...

    def stop_canary(self, stopped: CanarySpec) -> bool:
        """Store `stopped` (a canary marked stopped) only if the canary of its (policy, scope) is still the
        running one started at `stopped.started_at`: one atomic check and write, so of several replicas
        (or an operator and an automatic rollback) stopping it at once, one stop lands. True if it did."""
        ...

    def generation(self) -> int:
        """Incremented by every pointer or canary change; cheap to poll."""
        ...

    def file_hash(self, path: str) -> str:
        """Content hash of the last import of config file `path` ("" = never imported)."""
        ...

    def set_file_hash(self, path: str, content_hash: str) -> None: ...

    def close(self) -> None: ...


_SCHEMA = """
CREATE TABLE IF NOT EXISTS versions (
    kind TEXT NOT NULL, name TEXT NOT NULL, version TEXT NOT NULL, content TEXT NOT NULL,
    content_hash TEXT NOT NULL, author TEXT NOT NULL, comment TEXT NOT NULL, created_at REAL NOT NULL,
    PRIMARY KEY (kind, name, version));
CREATE TABLE IF NOT EXISTS pointers (
    kind TEXT NOT NULL, name TEXT NOT NULL, scope TEXT NOT NULL, version TEXT NOT NULL,
    updated_at REAL NOT NULL, author TEXT NOT NULL, PRIMARY KEY (kind, name, scope));
CREATE TABLE IF NOT EXISTS pointer_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, name TEXT NOT NULL, scope TEXT NOT NULL,
    version TEXT NOT NULL, previous TEXT NOT NULL, author TEXT NOT NULL, reason TEXT NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS canaries (
    policy TEXT NOT NULL, scope TEXT NOT NULL, spec TEXT NOT NULL, PRIMARY KEY (policy, scope));
CREATE TABLE IF NOT EXISTS file_imports (path TEXT PRIMARY KEY, content_hash TEXT NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta (key, value) VALUES ('generation', 0);
"""


class SQLitePolicyStore:
    """`PolicyStore` in one SQLite file (WAL mode: other processes on the host may share it).

    Example::

        store = SQLitePolicyStore(Path("var/policy_store.sqlite"))
        store.put_version(StoredVersion("policy", "default", "7", text, digest, "ops", "raise hate", time.time()))
        store.set_pointer("policy", "default", "", "7", expected="6", author="ops", reason="activate")
    """

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._db = open_shared(path)  # WAL; safe when several lanes open the same new file at once
        self._db.execute("PRAGMA synchronous=NORMAL")
        with self._lock:
            self._db.executescript(_SCHEMA)

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db, self._lock)

    def put_version(self, version: StoredVersion) -> StoredVersion:
        with self._transaction() as db:
            existing = self._get(db, version.kind, version.name, version.version)
            if existing is not None:
                return same_or_refused(existing, version)
            db.execute("INSERT INTO versions VALUES (?, ?, ?, ?, ?, ?, ?, ?)", _row(version))
            return version

    def get_version(self, kind: str, name: str, version: str) -> StoredVersion | None:
        with self._transaction() as db:
            return self._get(db, kind, name, version)

    @staticmethod
    def _get(db: sqlite3.Connection, kind: str, name: str, version: str) -> StoredVersion | None:
        row = db.execute("SELECT * FROM versions WHERE kind = ? AND name = ? AND version = ?",
                         (kind, name, version)).fetchone()
        return StoredVersion(*row) if row else None

    def list_versions(self, kind: str, name: str = "") -> list[StoredVersion]:
        with self._transaction() as db:
            rows = db.execute("SELECT * FROM versions WHERE kind = ? AND (? = '' OR name = ?) "
                              "ORDER BY created_at, rowid", (kind, name, name)).fetchall()
        return [StoredVersion(*row) for row in rows]

    def set_pointer(self, kind: str, name: str, scope: str, version: str, *, expected: str, author: str,
                    reason: str) -> PointerChange:
        now = self._clock()
        with self._transaction() as db:
            row = db.execute("SELECT version FROM pointers WHERE kind = ? AND name = ? AND scope = ?",
                             (kind, name, scope)).fetchone()
            current = row[0] if row else ""
            if current != expected:
                raise ConflictError(f"{kind}/{name} (scope {scope or 'all tenants'}) changed meanwhile: it points at "
                                    f"{current or 'nothing'!r}, not {expected or 'nothing'!r}; read it again and retry")
            if version:
                db.execute("INSERT OR REPLACE INTO pointers VALUES (?, ?, ?, ?, ?, ?)", (kind, name, scope, version, now, author))
            else:
                db.execute("DELETE FROM pointers WHERE kind = ? AND name = ? AND scope = ?", (kind, name, scope))
            cursor = db.execute("INSERT INTO pointer_log (kind, name, scope, version, previous, author, reason, at) "
                                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (kind, name, scope, version, current, author, reason, now))
            _bump(db)
            return PointerChange(int(cursor.lastrowid or 0), kind, name, scope, version, current, author, reason, now)

    def pointers(self) -> list[Pointer]:
        with self._transaction() as db:
            rows = db.execute("SELECT * FROM pointers ORDER BY kind, name, scope").fetchall()
        return [Pointer(*row) for row in rows]

    def history(self, kind: str, name: str, scope: str) -> list[PointerChange]:
        with self._transaction() as db:
            rows = db.execute("SELECT * FROM pointer_log WHERE kind = ? AND name = ? AND scope = ? ORDER BY seq",
                              (kind, name, scope)).fetchall()
        return [PointerChange(*row) for row in rows]

    def put_canary(self, spec: CanarySpec) -> None:
        with self._transaction() as db:
            db.execute("INSERT OR REPLACE INTO canaries VALUES (?, ?, ?)", (spec.policy, spec.scope, json.dumps(asdict(spec))))
            _bump(db)

    def canaries(self) -> list[CanarySpec]:
        with self._transaction() as db:
            rows = db.execute("SELECT spec FROM canaries ORDER BY policy, scope").fetchall()
        return [canary_from_dict(json.loads(row[0])) for row in rows]

    def stop_canary(self, stopped: CanarySpec) -> bool:
        with self._transaction() as db:
            row = db.execute("SELECT spec FROM canaries WHERE policy = ? AND scope = ?",
                             (stopped.policy, stopped.scope)).fetchone()
            current = canary_from_dict(json.loads(row[0])) if row else None
            if current is None or not current.running or current.started_at != stopped.started_at:
                return False
            db.execute("INSERT OR REPLACE INTO canaries VALUES (?, ?, ?)",
                       (stopped.policy, stopped.scope, json.dumps(asdict(stopped))))
            _bump(db)
            return True

    def generation(self) -> int:
        with self._transaction() as db:
            return int(db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0])

    def file_hash(self, path: str) -> str:
        with self._transaction() as db:
            row = db.execute("SELECT content_hash FROM file_imports WHERE path = ?", (path,)).fetchone()
        return str(row[0]) if row else ""

    def set_file_hash(self, path: str, content_hash: str) -> None:
        with self._transaction() as db:
            db.execute("INSERT OR REPLACE INTO file_imports VALUES (?, ?, ?)", (path, content_hash, self._clock()))

    def close(self) -> None:
        with self._lock:
            self._db.close()


class _Transaction:
    """`with`: one thread at a time, BEGIN IMMEDIATE … COMMIT (ROLLBACK on an exception)."""

    def __init__(self, db: sqlite3.Connection, lock: threading.Lock) -> None:
        self._db, self._lock = db, lock

    def __enter__(self) -> sqlite3.Connection:
        self._lock.acquire()
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._lock.release()
            raise
        return self._db

    def __exit__(self, kind: type[BaseException] | None, *rest: Any) -> None:
        try:
            self._db.execute("COMMIT" if kind is None else "ROLLBACK")
        finally:
            self._lock.release()


def _bump(db: sqlite3.Connection) -> None:
    db.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")


def _row(version: StoredVersion) -> Sequence[Any]:
    return (version.kind, version.name, version.version, version.content, version.content_hash, version.author,
            version.comment, version.created_at)


def same_or_refused(existing: StoredVersion, version: StoredVersion) -> StoredVersion:
    """`existing` when `version` is the same content stored again; AlreadyExistsError otherwise (versions are
    immutable). Every store's `put_version` answers an existing id this way."""
    if existing.content_hash != version.content_hash:
        raise AlreadyExistsError(
            f"{version.kind}/{version.name}: version: {version.version!r} already exists with different "
            f"content (stored by {existing.author} at {iso_time(existing.created_at)}); versions are "
            f"immutable, choose a new version id")
    return existing


def canary_from_dict(data: dict[str, Any]) -> CanarySpec:
    return CanarySpec(**{**data, "bounds": RollbackBounds(**data["bounds"])})


def iso_time(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
