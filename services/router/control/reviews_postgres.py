"""Review tasks in PostgreSQL (`lifecycle.postgres_dsn`), shared by every router replica: each replica
offers the tasks of its own decisions, and a review tool streaming from any replica's admin API leases
every replica's. Same contract as the SQLite queue (services/router/control/review_queue.py): at-least-once
delivery with leases and acks, one tenant per statement, at most `max_pending` tasks per tenant, kept at
most `retention_s`.

Differences that come with sharing: leasing takes rows with `FOR UPDATE SKIP LOCKED`, so streams on
several replicas never lease the same task at once; a write that fails (PostgreSQL down or slow) keeps
the tasks buffered and retries them at the next flush (bounded by `max_buffer`; beyond, the oldest are
dropped and counted) instead of dropping them at once; retention deletes in bounded batches.

Example::

    queue = PostgresReviewQueue("postgresql://auditmesh@db/auditmesh")
    queue.offer(record, "review"); queue.flush()
    tasks = queue.lease("acme", limit=10, visibility_s=60.0)
    queue.ack("acme", [t.task_id for t in tasks])
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any, Callable, Sequence

import psycopg

from services.router.control.audit import AuditRecord
from services.router.control.audit_store import encode_record
from services.router.control.postgres import PgConnection
from services.router.control.review_queue import (MAX_BUFFER, MAX_PENDING_PER_TENANT, PRUNE_EVERY_S, BufferedTasks, ReviewTask, TaskBuffer,
                                                  check_pending,
                                                  check_ack, check_lease)

log = logging.getLogger(__name__)
#: Rows deleted per retention statement, statements per round.
PRUNE_BATCH = 10_000
PRUNE_MAX_BATCHES = 10


class PostgresReviewQueue(BufferedTasks):
    """See the module docstring. `offer` from the event loop; the rest from worker threads."""

    def __init__(self, dsn: str, *, max_pending: int = MAX_PENDING_PER_TENANT, max_buffer: int = MAX_BUFFER,
                 retention_s: float = 30 * 86400.0, clock: Callable[[], float] = time.time) -> None:
        self.max_pending = max_pending
        self.retention_s = retention_s
        self._clock = clock
        self._buffer = TaskBuffer(max_buffer)
        self._flush_lock = threading.Lock()
        self._last_prune = 0.0
        self._db = PgConnection(dsn)
        self._reader = PgConnection(dsn, migrate=False)  # leases and acks never wait behind a flush

    def put(self, record: AuditRecord, reason: str, task_id: str, created: float) -> None:
        """Write one task now, under its own id and creation time, or raise (see ReviewQueue.put)."""
        with self._db.transaction() as cursor:
            cursor.execute("SELECT count(*), count(*) FILTER (WHERE task_id = %s) FROM review_tasks WHERE tenant = %s",
                           (task_id, record.tenant))
            row = cursor.fetchone()
            if row and int(row[1]):
                return
            check_pending(record.tenant, int(row[0]) if row else 0, self.max_pending)
            cursor.execute("INSERT INTO review_tasks (task_id, tenant, created, reason, record) VALUES (%s, %s, %s, %s, %s) "
                           "ON CONFLICT (tenant, task_id) DO NOTHING",
                           (task_id, record.tenant, created, reason, encode_record(record)))

    def flush(self) -> int:
        """Write the buffered tasks in one transaction; returns how many were stored. A tenant at its bound
        drops the rest of its tasks (counted); a failed write keeps them all for the next flush (raised)."""
        with self._flush_lock:
            taken = self._buffer.take()
            if not taken:
                self._prune()
                return 0
            stored = over = 0
            try:
                with self._db.transaction() as cursor:
                    room: dict[str, int] = {}
                    for record, reason in taken:
                        tenant = record.tenant
                        if tenant not in room:
                            cursor.execute("SELECT count(*) FROM review_tasks WHERE tenant = %s", (tenant,))
                            row = cursor.fetchone()
                            room[tenant] = self.max_pending - (int(row[0]) if row else 0)
                        if room[tenant] <= 0:
                            over += 1
                            continue
                        cursor.execute("INSERT INTO review_tasks (task_id, tenant, created, reason, record) "
                                       "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (tenant, task_id) DO NOTHING",
                                       (record.audit_id, tenant, record.time, reason, encode_record(record)))
                        room[tenant] -= cursor.rowcount
                        stored += cursor.rowcount
            except psycopg.Error:
                self._buffer.give_back(taken)  # back to the front, oldest first; beyond the bound, the oldest go
                raise
            self._buffer.drop(over)
            try:
                self._prune()
            except psycopg.Error as error:
                log.warning("review tasks: retention sweep failed (retried in %.0f s): %s", PRUNE_EVERY_S, error)
            return stored

    def lease(self, tenant: str, *, limit: int, visibility_s: float) -> list[ReviewTask]:
        """Up to `limit` of `tenant`'s tasks not leased now, oldest first, leased for `visibility_s`."""
        check_lease(limit, visibility_s)
        now = self._clock()

        def take(cursor: psycopg.Cursor[Any]) -> list[tuple[Any, ...]]:
            cursor.execute(
                "UPDATE review_tasks SET lease_until = %s, deliveries = deliveries + 1 WHERE seq IN ("
                "SELECT seq FROM review_tasks WHERE tenant = %s AND lease_until <= %s ORDER BY seq LIMIT %s "
                "FOR UPDATE SKIP LOCKED) RETURNING seq, task_id, reason, deliveries, record",
                (now + visibility_s, tenant, now, limit))
            return cursor.fetchall()

        # Taken twice only if the first answer was lost with its connection: those tasks come back when
        # their lease ends (at least once, as always).
        rows = sorted(self._reader.retrying(take))
        return [ReviewTask(task_id, reason, deliveries, AuditRecord.from_json_dict(json.loads(record)))
                for _, task_id, reason, deliveries, record in rows]

    def ack(self, tenant: str, task_ids: Sequence[str]) -> int:
        """Delete `tenant`'s tasks named in `task_ids` (another tenant's ids match nothing); how many."""
        ids = check_ack(task_ids)
        if not ids:
            return 0
        def delete(cursor: psycopg.Cursor[Any]) -> int:
            cursor.execute("DELETE FROM review_tasks WHERE tenant = %s AND task_id = ANY(%s)", (tenant, ids))
            return max(cursor.rowcount, 0)

        return self._reader.retrying(delete)

    def leased(self, tenant: str, task_ids: Sequence[str]) -> set[str]:
        """Which of `task_ids` are still `tenant`'s, leased now (delivered, not acked, lease not over)."""
        rows = self._reader.fetch("SELECT task_id FROM review_tasks WHERE tenant = %s AND lease_until > %s "
                                  "AND task_id = ANY(%s)", (tenant, self._clock(), list(task_ids)))
        return {str(row[0]) for row in rows}

    def pending(self, tenant: str) -> int:
        """`tenant`'s tasks not yet acked (written ones)."""
        rows = self._reader.fetch("SELECT count(*) FROM review_tasks WHERE tenant = %s", (tenant,))
        return int(rows[0][0]) if rows else 0

    def purge_tenant(self, tenant: str) -> int:
        """Delete every task of `tenant`, buffered ones written first (see ReviewQueue.purge_tenant)."""
        self.flush()

        def delete(cursor: psycopg.Cursor[Any]) -> int:
            cursor.execute("DELETE FROM review_tasks WHERE tenant = %s", (tenant,))
            return max(cursor.rowcount, 0)

        return self._reader.retrying(delete)

    def close(self) -> None:
        try:
            self.flush()
        except psycopg.Error as error:
            log.error("review tasks: %d could not be written to PostgreSQL before shutdown: %s", len(self._buffer), error)
        self._db.close()
        self._reader.close()

    def _prune(self) -> None:
        now = self._clock()
        if now - self._last_prune < PRUNE_EVERY_S:
            return
        self._last_prune = now
        for _ in range(PRUNE_MAX_BATCHES):
            with self._db.transaction() as cursor:
                cursor.execute("DELETE FROM review_tasks WHERE seq IN (SELECT seq FROM review_tasks WHERE created < %s "
                               "ORDER BY created LIMIT %s)", (now - self.retention_s, PRUNE_BATCH))
                if cursor.rowcount < PRUNE_BATCH:
                    break
