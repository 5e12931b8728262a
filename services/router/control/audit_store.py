"""The decision audit log: append-only, in one SQLite file (`lifecycle.audit_path`, default
`var/audit.sqlite`), queryable by tenant and time, with retention.

The request path only appends to an in-memory buffer (`append`, O(1), never blocks on disk); a
background task writes the buffer in one transaction every `flush_interval_s` (`flush`, in a worker
thread). If the disk cannot keep up, the buffer is bounded and the oldest pending records are
dropped and counted (`dropped`) rather than stalling moderation. Records older than `retention_s` are
deleted as new ones are written (the rotation). A query always names one tenant and can return
only that tenant's records: the tenant is part of the SQL condition, never a filter applied later.

Size (docs/policy-lifecycle.md "Audit log size"; `bench/audit_size.py` measures it): each record is compact JSON (no
spaces), or with `compression="zlib"` (config `lifecycle.audit_compression`) zlib-compressed JSON in
a BLOB; both forms are read back, so the setting can change on a live file. The file is created
0600, its -wal / -shm files too (services/router/control/sqlite_wal.py).

Example::

    log = AuditStore(Path("var/audit.sqlite"), retention_s=30 * 86400)
    log.append(record)
    log.flush()
    records, next_token = log.query("acme", since=t0, until=t1, limit=100)
"""

from __future__ import annotations

import collections
import json
import logging
import sqlite3
import threading
import time
import zlib
from pathlib import Path
from typing import Callable, Literal, Protocol

from services.common.errors import InvalidRequestError
from services.router.control.audit import AuditRecord
from services.router.control.sqlite_wal import open_shared

log = logging.getLogger(__name__)
MAX_QUERY_LIMIT = 1000
#: Records written per transaction at most.
FLUSH_CHUNK = 5000
#: Seconds between retention sweeps.
PRUNE_EVERY_S = 60.0
Compression = Literal["none", "zlib"]
#: zlib level: 6 (zlib's default) is within a few % of 9 on these records at a fraction of the CPU.
ZLIB_LEVEL = 6

_SCHEMA = """
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, audit_id TEXT NOT NULL UNIQUE, tenant TEXT NOT NULL,
    time REAL NOT NULL, record TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS audit_tenant_time ON audit (tenant, time, seq);
"""


class AuditLog(Protocol):
    """What the router needs from an audit log: this SQLite one, or PostgreSQL's
    (services/router/control/audit_postgres.py). `append` never blocks; `flush` and `query` do."""

    dropped: int
    write_errors: int

    @property
    def pending(self) -> int: ...

    def append(self, record: AuditRecord) -> None: ...

    def flush(self) -> int: ...

    def query(self, tenant: str, *, since: float = 0.0, until: float = 0.0, limit: int = 100,
              page_token: str = "") -> tuple[list[AuditRecord], str]: ...

    def get(self, tenant: str, audit_id: str) -> AuditRecord | None: ...

    def purge_tenant(self, tenant: str) -> int: ...

    def close(self) -> None: ...


def encode_record(record: AuditRecord) -> str:
    """A record as compact JSON text."""
    return json.dumps(record.to_json_dict(), ensure_ascii=False, separators=(",", ":"))


def check_audit_settings(retention_s: float, compression: str) -> None:
    """ValueError for a retention or compression no audit log accepts."""
    if retention_s <= 0:
        raise ValueError(f"retention_s must be > 0, got {retention_s}")
    if compression not in ("none", "zlib"):
        raise ValueError(f"compression must be 'none' or 'zlib', got {compression!r}")


def query_limit(tenant: str, page_token: str, limit: int) -> int:
    """The page size of one audit query (default 100, at most MAX_QUERY_LIMIT); InvalidRequestError without
    a tenant or with a page token no query returned."""
    if not tenant:
        raise InvalidRequestError("tenant: required; audit records are read one tenant at a time")
    if page_token and not page_token.isdigit():
        raise InvalidRequestError(f"page_token: not a token from a previous response: {page_token!r}")
    return min(limit or 100, MAX_QUERY_LIMIT)


class AuditStore:
    """See the module docstring. `append` from the event loop; `flush` and `query` from any thread."""

    def __init__(self, path: Path, *, retention_s: float = 30 * 86400.0, max_pending: int = 100_000,
                 clock: Callable[[], float] = time.time, compression: Compression = "none") -> None:
        check_audit_settings(retention_s, compression)
        self.retention_s = retention_s
        self.compression = compression
        self.dropped = 0
        #: Always 0 here: a failed SQLite write raises to the flushing task (the disk is local).
        self.write_errors = 0
        self._clock = clock
        self._pending: collections.deque[AuditRecord] = collections.deque(maxlen=max_pending)
        self._lock = threading.Lock()
        self._db = open_shared(path)  # WAL; safe when several lanes open the same new file at once
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._last_prune = 0.0

    def append(self, record: AuditRecord) -> None:
        """Queue one record for the next flush (drops the oldest pending one when the buffer is full)."""
        if len(self._pending) == self._pending.maxlen:
            self.dropped += 1
        self._pending.append(record)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def flush(self) -> int:
        """Write every pending record; returns how many were written."""
        written = 0
        with self._lock:
            while self._pending:
                chunk = [self._pending.popleft() for _ in range(min(FLUSH_CHUNK, len(self._pending)))]
                rows = [(r.audit_id, r.tenant, r.time, self._encode(r)) for r in chunk]
                self._db.execute("BEGIN")
                self._db.executemany("INSERT OR IGNORE INTO audit (audit_id, tenant, time, record) VALUES (?, ?, ?, ?)", rows)
                self._db.execute("COMMIT")
                written += len(rows)
            self._prune()
        return written

    def _encode(self, record: AuditRecord) -> str | bytes:
        text = encode_record(record)
        return zlib.compress(text.encode("utf-8"), ZLIB_LEVEL) if self.compression == "zlib" else text

    def _prune(self) -> None:
        now = self._clock()
        if now - self._last_prune < PRUNE_EVERY_S:
            return
        self._last_prune = now
        deleted = self._db.execute("DELETE FROM audit WHERE time < ?", (now - self.retention_s,)).rowcount
        if deleted:
            log.info("audit log: deleted %d records older than %.0f s", deleted, self.retention_s)

    def query(self, tenant: str, *, since: float = 0.0, until: float = 0.0, limit: int = 100,
              page_token: str = "") -> tuple[list[AuditRecord], str]:
        """Records of `tenant` with since <= time < until (0 = unbounded), oldest first, and the token
        of the next page ("" when there is none). Pending records are flushed first."""
        limit = query_limit(tenant, page_token, limit)
        self.flush()
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, record FROM audit WHERE tenant = ? AND time >= ? AND time < ? AND seq > ? "
                "ORDER BY seq LIMIT ?", (tenant, since, until or float("inf"), int(page_token or 0), limit + 1)).fetchall()
        records = [AuditRecord.from_json_dict(json.loads(decode(row[1]))) for row in rows[:limit]]
        return records, str(rows[limit - 1][0]) if len(rows) > limit else ""

    def get(self, tenant: str, audit_id: str) -> AuditRecord | None:
        """`tenant`'s record `audit_id`, or None (no such record, another tenant's, or pruned). Pending
        records are flushed first."""
        self.flush()
        with self._lock:
            row = self._db.execute("SELECT record FROM audit WHERE audit_id = ? AND tenant = ?", (audit_id, tenant)).fetchone()
        return AuditRecord.from_json_dict(json.loads(decode(row[0]))) if row else None

    def purge_tenant(self, tenant: str) -> int:
        """Delete every record of `tenant`, pending ones written first (a tenant removed from the mesh;
        PolicyAdmin PurgeTenant); how many."""
        self.flush()
        with self._lock:
            return int(self._db.execute("DELETE FROM audit WHERE tenant = ?", (tenant,)).rowcount)

    def close(self) -> None:
        self.flush()
        with self._lock:
            self._db.close()


def decode(stored: str | bytes) -> str:
    """A stored record's JSON text (a BLOB is zlib-compressed JSON)."""
    return zlib.decompress(stored).decode("utf-8") if isinstance(stored, bytes) else stored
