"""Review tasks out (issue 40): every REVIEW decision, a sample of ALLOW and BLOCK decisions per tenant
(`review_tasks` in the tenants file), and the decisions a shadow canary's candidate would have taken
differently, as tasks a platform's review tool consumes (PolicyAdmin StreamReviewTasks / AckReviewTasks,
docs/tenant-classifiers.md "Review tasks").

A task is the decision's audit record (services/router/control/audit.py: categories and scores, evidence
references, policy and model versions, time; no content unless the policy's `audit.include_content`), its
`reason` and how many times it was delivered. Its id is the audit record's id; an appeal's task (reason
"appeal", written at once by `put`) is `appeal:<appeal id>` (services/router/control/appeals.py), and its
record is the decision appealed.

Embedded store: one SQLite file (`lifecycle.review_tasks_path`; default `review_tasks.sqlite` beside the
policy store), WAL, created 0600, shared by the router lanes of one host. Every statement names one tenant
in its SQL condition: a consumer never sees, leases or acks another tenant's tasks.

Delivery is at least once: a consumer leases tasks for a visibility timeout and acks them once its review
tool holds them (an ack deletes them); a task not acked before its lease ends is delivered again
(`deliveries` counts), to this consumer or another. Leases are in the file, so a router killed mid-stream
loses no task it had written: after the restart, the unacked ones are delivered again.

Write path: the request path only appends to a bounded in-memory buffer (`offer`, O(1), never waits on
disk; `TaskBuffer`, shared by the three queues); a background task writes it every `flush_interval_s` in one transaction. A crash (SIGKILL) can lose
the tasks of the last interval not yet written (default 0.05 s); a graceful stop writes them all. A full
buffer, a tenant already holding `max_pending` tasks, or a write that fails drops tasks and counts them
(`dropped`). Tasks are kept at most `retention_s` (the audit log's retention, `lifecycle.audit_retention_days`):
a task is a copy of an audit record and never outlives it.

Example::

    queue = ReviewQueue(Path("var/review_tasks.sqlite"))
    queue.offer(record, "review")
    queue.flush()
    tasks = queue.lease("acme", limit=10, visibility_s=60.0)
    queue.ack("acme", [t.task_id for t in tasks])
"""

from __future__ import annotations

import collections
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal, Protocol, Sequence

from services.common.errors import InvalidRequestError, LimitExceededError
from services.router.control.audit import AuditRecord
from services.router.control.canary import canary_fraction
from services.router.control.sqlite_wal import open_shared, write_transaction

__all__ = ["ReviewQueue", "ReviewSampling", "ReviewTask", "ReviewTasks", "Reason", "BufferedTasks", "TaskBuffer", "check_lease", "check_pending",
           "task_reason"]

Reason = Literal["review", "shadow_disagreement", "sample_block", "sample_allow", "appeal"]
#: Tasks a tenant may hold undelivered or unacked; beyond, new ones are dropped and counted.
MAX_PENDING_PER_TENANT = 100_000
#: Tasks waiting in memory for the next write at most.
MAX_BUFFER = 50_000
MAX_LEASE = 1000
MAX_VISIBILITY_S = 3600.0
#: Seconds between deletions of tasks past their retention.
PRUNE_EVERY_S = 60.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT NOT NULL, tenant TEXT NOT NULL, created REAL NOT NULL,
    reason TEXT NOT NULL, record TEXT NOT NULL, lease_until REAL NOT NULL DEFAULT 0,
    deliveries INTEGER NOT NULL DEFAULT 0, UNIQUE (tenant, task_id));
CREATE INDEX IF NOT EXISTS tasks_by_tenant ON tasks (tenant, seq);
CREATE INDEX IF NOT EXISTS tasks_by_age ON tasks (created);
DROP INDEX IF EXISTS tasks_ready;
"""


@dataclass(frozen=True)
class ReviewSampling:
    """A tenant's review tasks (`review_tasks` in the tenants file): REVIEW decisions (`review`), decisions
    a shadow canary's candidate takes differently (`shadow_disagreements`), and these shares of its ALLOW
    and BLOCK decisions (chosen by a stable hash of the item id: the same item is always in or out)."""

    review: bool = True
    shadow_disagreements: bool = True
    sample_allow: float = 0.0
    sample_block: float = 0.0

    def __post_init__(self) -> None:
        for name in ("sample_allow", "sample_block"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class ReviewTask:
    task_id: str
    reason: str
    deliveries: int
    record: AuditRecord


def task_reason(sampling: ReviewSampling, decision: str, shadow_decision: str | None, item_key: str) -> Reason | None:
    """Why this decision becomes a review task, or None. Pure.

    Example::

        >>> task_reason(ReviewSampling(), "review", None, "m-1")
        'review'
        >>> task_reason(ReviewSampling(sample_allow=1.0), "allow", None, "m-1"), task_reason(ReviewSampling(), "allow", None, "m-1")
        ('sample_allow', None)
    """
    if decision == "review" and sampling.review:
        return "review"
    if shadow_decision is not None and shadow_decision != decision and sampling.shadow_disagreements:
        return "shadow_disagreement"
    share = sampling.sample_block if decision == "block" else sampling.sample_allow if decision == "allow" else 0.0
    if share > 0.0 and canary_fraction(item_key) < share:
        return "sample_block" if decision == "block" else "sample_allow"
    return None


class ReviewTasks(Protocol):
    """What the router needs of a review-task queue: this SQLite one, PostgreSQL's shared by every router
    replica (services/router/control/reviews_postgres.py), or Redis Streams' shared by every replica on one
    Redis (services/router/control/reviews_redis.py). `offer` never blocks; the rest may."""

    @property
    def dropped(self) -> int: ...

    @property
    def buffered(self) -> int: ...

    def offer(self, record: AuditRecord, reason: str) -> None: ...

    def put(self, record: AuditRecord, reason: str, task_id: str, created: float) -> None: ...

    def flush(self) -> int: ...

    def lease(self, tenant: str, *, limit: int, visibility_s: float) -> list[ReviewTask]: ...

    def ack(self, tenant: str, task_ids: Sequence[str]) -> int: ...

    def leased(self, tenant: str, task_ids: Sequence[str]) -> set[str]: ...

    def pending(self, tenant: str) -> int: ...

    def purge_tenant(self, tenant: str) -> int: ...

    def close(self) -> None: ...


def check_lease(limit: int, visibility_s: float) -> None:
    """InvalidRequestError for a lease size or visibility timeout out of bounds."""
    if not 1 <= limit <= MAX_LEASE:
        raise InvalidRequestError(f"limit: must be 1..{MAX_LEASE}, got {limit}")
    if not 0.0 < visibility_s <= MAX_VISIBILITY_S:
        raise InvalidRequestError(f"visibility_timeout_s: must be in (0, {MAX_VISIBILITY_S:g}], got {visibility_s}")


def check_pending(tenant: str, pending: int, max_pending: int) -> None:
    """LimitExceededError when `tenant` already holds `max_pending` tasks (`put`)."""
    if pending >= max_pending:
        raise LimitExceededError(f"tenant {tenant!r} holds {pending} review tasks unacked, the limit; ack some first")


def check_ack(task_ids: Sequence[str]) -> list[str]:
    """The distinct ids of one ack (InvalidRequestError over MAX_LEASE)."""
    if len(task_ids) > MAX_LEASE:
        raise InvalidRequestError(f"task_ids: at most {MAX_LEASE} per call, got {len(task_ids)}")
    return list(dict.fromkeys(task_ids))


class TaskBuffer:
    """The request path's side of every review-task queue: tasks waiting for the next write, at most `bound`
    (the oldest is dropped and counted to make room); thread-safe, `offer` O(1) and never waits on I/O."""

    def __init__(self, bound: int = MAX_BUFFER) -> None:
        self.bound = bound
        self._tasks: collections.deque[tuple[AuditRecord, str]] = collections.deque()
        self._lock = threading.Lock()
        self._dropped = 0

    def __len__(self) -> int:
        return len(self._tasks)

    @property
    def dropped(self) -> int:
        """Tasks dropped so far (the buffer full, a tenant at its bound, or a write that failed for good)."""
        return self._dropped

    def offer(self, record: AuditRecord, reason: str) -> None:
        with self._lock:
            if len(self._tasks) >= self.bound:
                self._tasks.popleft()
                self._dropped += 1
            self._tasks.append((record, reason))

    def take(self) -> list[tuple[AuditRecord, str]]:
        """Every buffered task, oldest first (the buffer empty after)."""
        with self._lock:
            taken = list(self._tasks)
            self._tasks.clear()
            return taken

    def give_back(self, taken: Sequence[tuple[AuditRecord, str]]) -> None:
        """Tasks a write did not take, back at the front, oldest first; beyond the bound the oldest go (counted)."""
        with self._lock:
            self._tasks.extendleft(reversed(taken))
            while len(self._tasks) > self.bound:
                self._tasks.popleft()
                self._dropped += 1

    def drop(self, count: int) -> None:
        """Count `count` tasks as dropped (a tenant at its bound, a write that failed for good)."""
        with self._lock:
            self._dropped += count


class BufferedTasks:
    """What every review-task queue does the same: `offer` into its TaskBuffer (`_buffer`), and its counts."""

    _buffer: TaskBuffer

    def offer(self, record: AuditRecord, reason: str) -> None:
        """Queue a task for the next write (the oldest buffered one dropped and counted when full)."""
        self._buffer.offer(record, reason)

    @property
    def dropped(self) -> int:
        """Tasks dropped so far (buffer full, a tenant at its bound, or a write that failed for good)."""
        return self._buffer.dropped

    @property
    def buffered(self) -> int:
        return len(self._buffer)


class ReviewQueue(BufferedTasks):
    """See the module docstring. `offer` from the event loop; the rest from any thread."""

    def __init__(self, path: Path, *, max_pending: int = MAX_PENDING_PER_TENANT, max_buffer: int = MAX_BUFFER,
                 retention_s: float = 30 * 86400.0, clock: Callable[[], float] = time.time) -> None:
        self.max_pending = max_pending
        self.retention_s = retention_s
        self._clock = clock
        self._last_prune = 0.0
        self._buffer = TaskBuffer(max_buffer)
        self._lock = threading.Lock()
        self._db = open_shared(path)
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    def put(self, record: AuditRecord, reason: str, task_id: str, created: float) -> None:
        """Write one task now, under its own id and creation time (an appeal's: services/router/control/appeals.py),
        or raise: LimitExceededError when the tenant holds `max_pending` tasks; a failed write raises as it is.
        Writing the same id again changes nothing."""
        text = json.dumps(record.to_json_dict(), ensure_ascii=False, separators=(",", ":"))
        with self._lock, write_transaction(self._db):
            if self._db.execute("SELECT 1 FROM tasks WHERE tenant = ? AND task_id = ?", (record.tenant, task_id)).fetchone():
                return
            check_pending(record.tenant, self._count(record.tenant), self.max_pending)
            self._db.execute("INSERT OR IGNORE INTO tasks (task_id, tenant, created, reason, record) VALUES (?, ?, ?, ?, ?)",
                             (task_id, record.tenant, created, reason, text))

    def flush(self) -> int:
        """Write the buffered tasks in one transaction; returns how many were stored. A tenant at its bound
        drops the rest of its tasks; a write that fails (a locked or full disk) drops them all; both are
        counted. Tasks older than `retention_s` (the audit log's retention) are deleted as it goes."""
        with self._lock:
            taken = self._buffer.take()
            if not taken:
                self._prune()
                return 0
            stored = over = 0
            try:
                with write_transaction(self._db):
                    room: dict[str, int] = {}
                    for record, reason in taken:
                        tenant = record.tenant
                        if tenant not in room:
                            room[tenant] = self.max_pending - self._count(tenant)
                        if room[tenant] <= 0:
                            over += 1
                            continue
                        text = json.dumps(record.to_json_dict(), ensure_ascii=False, separators=(",", ":"))
                        inserted = self._db.execute(
                            "INSERT OR IGNORE INTO tasks (task_id, tenant, created, reason, record) VALUES (?, ?, ?, ?, ?)",
                            (record.audit_id, tenant, record.time, reason, text)).rowcount
                        room[tenant] -= inserted
                        stored += inserted
            except Exception:
                self._buffer.drop(len(taken))  # none of them was written
                raise
            self._buffer.drop(over)
            self._prune()
            return stored

    def lease(self, tenant: str, *, limit: int, visibility_s: float) -> list[ReviewTask]:
        """Up to `limit` of `tenant`'s tasks that are not leased (never delivered, or their lease ended),
        oldest first, leased for `visibility_s` seconds. Finding none costs a read, no write lock."""
        check_lease(limit, visibility_s)
        now = self._clock()
        query = ("SELECT seq, task_id, reason, deliveries, record FROM tasks WHERE tenant = ? AND lease_until <= ? "
                 "ORDER BY seq LIMIT ?")
        with self._lock:
            if not self._db.execute(query, (tenant, now, 1)).fetchall():
                return []
            with write_transaction(self._db):
                rows = self._db.execute(query, (tenant, now, limit)).fetchall()
                self._db.executemany("UPDATE tasks SET lease_until = ?, deliveries = deliveries + 1 WHERE seq = ?",
                                     [(now + visibility_s, row[0]) for row in rows])
        return [ReviewTask(task_id, reason, deliveries + 1, AuditRecord.from_json_dict(json.loads(record)))
                for _, task_id, reason, deliveries, record in rows]

    def ack(self, tenant: str, task_ids: Sequence[str]) -> int:
        """Delete `tenant`'s tasks named in `task_ids` (another tenant's ids match nothing); how many."""
        ids = check_ack(task_ids)
        if not ids:
            return 0
        with self._lock:
            marks = ",".join("?" * len(ids))
            return int(self._db.execute(f"DELETE FROM tasks WHERE tenant = ? AND task_id IN ({marks})",
                                        (tenant, *ids)).rowcount)

    def leased(self, tenant: str, task_ids: Sequence[str]) -> set[str]:
        """Which of `task_ids` are still `tenant`'s, leased now (delivered, not acked, lease not over)."""
        now = self._clock()
        found: set[str] = set()
        ids = list(task_ids)
        with self._lock:
            for start in range(0, len(ids), 500):
                chunk = ids[start:start + 500]
                marks = ",".join("?" * len(chunk))
                found.update(row[0] for row in self._db.execute(
                    f"SELECT task_id FROM tasks WHERE tenant = ? AND lease_until > ? AND task_id IN ({marks})",
                    (tenant, now, *chunk)))
        return found

    def pending(self, tenant: str) -> int:
        """`tenant`'s tasks not yet acked (written ones)."""
        with self._lock:
            return self._count(tenant)

    def purge_tenant(self, tenant: str) -> int:
        """Delete every task of `tenant`, buffered ones written first (a tenant removed from the mesh;
        PolicyAdmin PurgeTenant); how many."""
        self.flush()
        with self._lock:
            return int(self._db.execute("DELETE FROM tasks WHERE tenant = ?", (tenant,)).rowcount)

    def close(self) -> None:
        self.flush()
        with self._lock:
            self._db.close()

    def _prune(self) -> None:
        now = self._clock()
        if now - self._last_prune < PRUNE_EVERY_S:
            return
        self._last_prune = now
        self._db.execute("DELETE FROM tasks WHERE created < ?", (now - self.retention_s,))

    def _count(self, tenant: str) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM tasks WHERE tenant = ?", (tenant,)).fetchone()[0])
