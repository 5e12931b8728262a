"""The decision audit log in PostgreSQL (`lifecycle.postgres_dsn`): every router replica writes into one
table, and the admin API's queries see all replicas' records.

Like the SQLite log (services/router/control/audit_store.py), the request path only appends to a
bounded in-memory buffer; a background task writes it every `audit_flush_interval_s`, here as
multi-row inserts (`executemany`, pipelined by psycopg) of up to `FLUSH_CHUNK` records per
transaction, each record once (`ON CONFLICT (audit_id) DO NOTHING`, so a retried chunk that had in
fact committed writes nothing twice). A database that is down, slow or full never blocks or fails
moderation: a chunk that could not be written goes back to the front of the buffer and is retried at
the next flush (`write_errors` counts the failed attempts); only when the buffer is full are the
oldest records dropped, and counted (`dropped`).

Records are JSON text (`record::jsonb->>'decision'` in SQL; text, because jsonb refuses some JSON a
record may hold, such as an escaped NUL in a tenant's item id), or zlib-compressed JSON in `record_zlib`
with `compression="zlib"`. A chunk the database refuses for its content (DataError, IntegrityError) is
written row by row, and only the rows it refuses are dropped (`rejected`, logged with their audit ids),
so no record can block the others. Retention: every `PRUNE_EVERY_S` one replica at a time (an advisory
lock) deletes the records older than `retention_s`, at most `PRUNE_MAX_BATCHES` batches of
`PRUNE_BATCH` rows per round (short transactions on the index on time). Queries, on a connection of
their own so they never hold up the writes, name one tenant (part of the SQL condition), page by write
order, and see only records older than `QUERY_HORIZON_S`: every replica has written those, so a page
boundary never passes over a record another replica was still committing. Records written late (after
an outage) show up in queries of their time range, not in pages already read.

Example::

    log = PostgresAuditLog("postgresql://auditmesh@db/auditmesh", retention_s=30 * 86400)
    log.append(record)
    log.flush()
    records, next_token = log.query("acme", since=t0, until=t1, limit=100)
"""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
import zlib
from typing import Any, Callable

import psycopg

from services.router.control.audit import AuditRecord
from services.router.control.audit_store import (FLUSH_CHUNK, PRUNE_EVERY_S, ZLIB_LEVEL, Compression, check_audit_settings,
                                                 encode_record, query_limit)
from services.router.control.postgres import PgConnection

log = logging.getLogger(__name__)
_INSERT = ("INSERT INTO audit_records (audit_id, tenant, time, record, record_zlib) VALUES (%s, %s, %s, %s, %s) "
           "ON CONFLICT (audit_id) DO NOTHING")
#: Rows deleted per retention statement, and statements per retention round.
PRUNE_BATCH = 10_000
PRUNE_MAX_BATCHES = 10
#: Only one replica prunes at a time (an arbitrary constant).
PRUNE_LOCK = 0x617564_697401
#: Queries see records older than this (seconds): every replica has written them by then.
QUERY_HORIZON_S = 2.0
#: At most one error log line per this many seconds while the database fails.
ERROR_LOG_EVERY_S = 10.0


class PostgresAuditLog:
    """See the module docstring. `append` from the event loop; `flush` and `query` from a worker thread."""

    def __init__(self, dsn: str, *, retention_s: float = 30 * 86400.0, max_pending: int = 100_000,
                 clock: Callable[[], float] = time.time, compression: Compression = "none") -> None:
        check_audit_settings(retention_s, compression)
        self.retention_s = retention_s
        self.compression = compression
        self.dropped = 0
        self.write_errors = 0
        #: Records the database refused for their content (logged, and counted in `dropped` too).
        self.rejected = 0
        self._clock = clock
        self._max_pending = max_pending
        self._pending: collections.deque[AuditRecord] = collections.deque()
        self._buffer_lock = threading.Lock()  # append (event loop) against a chunk put back (worker)
        self._flush_lock = threading.Lock()   # one flush at a time
        self._db = PgConnection(dsn)
        self._reader = PgConnection(dsn, migrate=False)
        self._last_prune = 0.0
        self._last_error_log = 0.0

    def append(self, record: AuditRecord) -> None:
        """Queue one record for the next flush (drops the oldest pending one when the buffer is full)."""
        with self._buffer_lock:
            if len(self._pending) >= self._max_pending:
                self._pending.popleft()
                self.dropped += 1
            self._pending.append(record)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def flush(self) -> int:
        """Write the pending records; returns how many were written. A failure is logged and counted, the
        unwritten records stay buffered for the next flush; nothing is raised."""
        written = 0
        with self._flush_lock:
            while self._pending:
                with self._buffer_lock:
                    chunk = [self._pending.popleft() for _ in range(min(FLUSH_CHUNK, len(self._pending)))]
                try:
                    self._write(chunk)
                except (psycopg.DataError, psycopg.IntegrityError):
                    rejected_before = self.rejected
                    unwritten = self._write_each(chunk)
                    written += len(chunk) - len(unwritten) - (self.rejected - rejected_before)
                    if unwritten:
                        self._put_back(unwritten)
                        return written
                    continue
                except psycopg.Error as error:
                    self._put_back(chunk)
                    self._failed(error)
                    return written
                written += len(chunk)
            try:
                self._prune()
            except psycopg.Error as error:
                log.warning("audit log: retention sweep failed (retried in %.0f s): %s", PRUNE_EVERY_S, error)
        return written

    def _row(self, record: AuditRecord) -> tuple[Any, ...]:
        text = encode_record(record)
        if self.compression == "zlib":
            return record.audit_id, record.tenant, record.time, None, zlib.compress(text.encode(), ZLIB_LEVEL)
        return record.audit_id, record.tenant, record.time, text, None

    def _write(self, chunk: list[AuditRecord]) -> None:
        with self._db.transaction() as cursor:
            cursor.executemany(_INSERT, [self._row(record) for record in chunk])

    def _write_each(self, chunk: list[AuditRecord]) -> list[AuditRecord]:
        """Write `chunk` one record per transaction, dropping (and counting) what the database refuses
        for its content; returns the records not written for another reason (to retry later)."""
        for index, record in enumerate(chunk):
            try:
                with self._db.transaction() as cursor:
                    cursor.execute(_INSERT, self._row(record))
            except (psycopg.DataError, psycopg.IntegrityError) as error:
                self.rejected += 1
                self.dropped += 1
                log.error("audit log: PostgreSQL refused record %s of tenant %s; dropped: %s",
                          record.audit_id, record.tenant, error)
            except psycopg.Error as error:
                self._failed(error)
                return chunk[index:]
        return []

    def _put_back(self, chunk: list[AuditRecord]) -> None:
        """Return an unwritten chunk to the front; if the buffer filled meanwhile, its oldest are dropped."""
        with self._buffer_lock:
            room = max(0, self._max_pending - len(self._pending))
            kept = chunk[len(chunk) - min(room, len(chunk)):]
            self.dropped += len(chunk) - len(kept)
            self._pending.extendleft(reversed(kept))

    def _failed(self, error: psycopg.Error) -> None:
        self.write_errors += 1
        now = time.monotonic()
        if now - self._last_error_log >= ERROR_LOG_EVERY_S:
            self._last_error_log = now
            log.error("audit log: PostgreSQL write failed (%d records buffered, retried at the next flush): %s",
                      len(self._pending), error)

    def _prune(self) -> None:
        now = self._clock()
        if now - self._last_prune < PRUNE_EVERY_S:
            return
        self._last_prune = now
        deleted = 0
        for _ in range(PRUNE_MAX_BATCHES):
            with self._db.transaction() as cursor:
                cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", (PRUNE_LOCK,))
                row = cursor.fetchone()
                if not row or not row[0]:
                    break  # another replica is pruning
                cursor.execute("DELETE FROM audit_records WHERE seq IN (SELECT seq FROM audit_records WHERE time < %s "
                               "ORDER BY time LIMIT %s)", (now - self.retention_s, PRUNE_BATCH))
                count = cursor.rowcount
            deleted += max(count, 0)
            if count < PRUNE_BATCH:
                break
        if deleted:
            log.info("audit log: deleted %d records older than %.0f s", deleted, self.retention_s)

    def query(self, tenant: str, *, since: float = 0.0, until: float = 0.0, limit: int = 100,
              page_token: str = "") -> tuple[list[AuditRecord], str]:
        """Records of `tenant` with since <= time < until (0 = unbounded; never newer than QUERY_HORIZON_S
        ago), in write order, and the token of the next page ("" when there is none). Pending records are
        flushed first."""
        limit = query_limit(tenant, page_token, limit)
        self.flush()
        until = min(until or float("inf"), self._clock() - QUERY_HORIZON_S)
        rows = self._reader.fetch("SELECT seq, record, record_zlib FROM audit_records WHERE tenant = %s AND time >= %s "
                                  "AND time < %s AND seq > %s ORDER BY seq LIMIT %s",
                                  (tenant, since, until, int(page_token or 0), limit + 1))
        records = [AuditRecord.from_json_dict(json.loads(text if text is not None else zlib.decompress(blob).decode()))
                   for _, text, blob in rows[:limit]]
        return records, str(rows[limit - 1][0]) if len(rows) > limit else ""

    def get(self, tenant: str, audit_id: str) -> AuditRecord | None:
        """`tenant`'s record `audit_id`, or None (no such record, another tenant's, or pruned). Pending
        records are flushed first."""
        self.flush()
        rows = self._reader.fetch("SELECT record, record_zlib FROM audit_records WHERE audit_id = %s AND tenant = %s",
                                  (audit_id, tenant))
        if not rows:
            return None
        text, blob = rows[0]
        return AuditRecord.from_json_dict(json.loads(text if text is not None else zlib.decompress(blob).decode()))

    def purge_tenant(self, tenant: str) -> int:
        """Delete every record of `tenant`, pending ones written first (see AuditStore.purge_tenant)."""
        self.flush()
        with self._db.transaction() as cursor:
            cursor.execute("DELETE FROM audit_records WHERE tenant = %s", (tenant,))
            return max(int(cursor.rowcount), 0)

    def close(self) -> None:
        self.flush()
        if self._pending:
            log.error("audit log: %d records could not be written to PostgreSQL before shutdown", len(self._pending))
        self._db.close()
        self._reader.close()
