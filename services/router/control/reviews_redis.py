"""Review tasks in Redis Streams (issue 40), shared by every router replica that uses one Redis
(`lifecycle.review_tasks_backend: redis`, with `redis.url`): the same contract as the SQLite queue
(services/router/control/review_queue.py; tests/unit/router/control/review_tasks_contract.py checks both).
Needs Redis 6.2 or later (XREADGROUP and XCLAIM inside scripts); one Redis, not a Redis Cluster.

Per tenant, four keys under `<redis.key_prefix>:review:{<tenant>}`:

* `:stream`: the tasks, one stream entry each (fields task_id, reason, created, record), read through one
  consumer group (`reviewers`): XREADGROUP hands an entry out once across every replica; its pending entry
  stays until acked;
* `:ids`: task id -> entry id (a task id is written once; an ack names task ids);
* `:leases`: a sorted set of delivered, unacked entries scored by when their lease ends;
* `:deliveries`: entry id -> how many times it was handed out.

A lease is one script (atomic): the entries whose lease ended are claimed again (XCLAIM), then new ones
read (XREADGROUP), each given `now + visibility` and one more delivery. An ack is one script: XACK, XDEL
and the three bookkeeping entries. A write adds a task only when its id is new and the tenant holds fewer
than `max_pending` (XLEN; acked entries are deleted). So two replicas leasing one tenant at once never
hand out one task twice, and a router killed mid-stream loses nothing it wrote: its leases end and the
tasks are delivered again. Durability across a Redis restart is Redis's own (AOF or RDB: configure it;
without, a restart loses the queue; `persistence_warning` says so at start). Whose lease ended first is
delivered first, then new tasks oldest first.

The request path only appends to a bounded in-memory buffer (`offer`); `flush` writes it in one pipeline
(not one transaction: each task's write is atomic on its own). A flush Redis does not take keeps the tasks
buffered for the next one (beyond the buffer's bound the oldest are dropped and counted).
Lease deadlines use this process's clock, as the SQLite and PostgreSQL queues do. Tasks older than
`retention_s` are deleted as `flush` goes (at most every PRUNE_EVERY_S).

Example::

    queue = RedisReviewQueue(redis.Redis.from_url("redis://localhost:6379/0"), prefix="auditmesh")
    queue.offer(record, "review")
    queue.flush()
    tasks = queue.lease("acme", limit=10, visibility_s=60.0)
    queue.ack("acme", [t.task_id for t in tasks])
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from typing import Any, Callable, Iterator, Sequence

from services.common.errors import UnavailableError
from services.router.control.audit import AuditRecord
from services.router.control.review_queue import (MAX_BUFFER, MAX_PENDING_PER_TENANT, MAX_VISIBILITY_S, PRUNE_EVERY_S,
                                                  BufferedTasks, ReviewTask, TaskBuffer, check_ack, check_lease, check_pending)

__all__ = ["GROUP", "RedisReviewQueue", "persistence_warning"]

log = logging.getLogger(__name__)

#: The consumer group every replica reads through, and the consumer name it reads as (one for all: a
#: lease, not a consumer, owns an entry; XCLAIM moves it back on redelivery).
GROUP = "reviewers"
CONSUMER = "router"

#: KEYS: stream, ids, tenants. ARGV: task id, reason, created, record, max pending, tenant, group.
#: 1 = written, 0 = the id exists, -1 = the tenant is at its bound.
_ADD = """
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 0 end
if redis.call('EXISTS', KEYS[1]) == 1 and redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[5]) then return -1 end
pcall(redis.call, 'XGROUP', 'CREATE', KEYS[1], ARGV[7], '0', 'MKSTREAM')
local id = redis.call('XADD', KEYS[1], '*', 'task_id', ARGV[1], 'reason', ARGV[2], 'created', ARGV[3], 'record', ARGV[4])
redis.call('HSET', KEYS[2], ARGV[1], id)
redis.call('SADD', KEYS[3], ARGV[6])
return 1
"""

#: KEYS: stream, leases, deliveries. ARGV: now, lease end, limit, group, consumer, orphan idle (ms).
#: Returns {entry id, fields, deliveries} per leased entry: first those whose lease ended, then new ones.
#: An orphan (delivered, in the group's pending list, but in no lease: a lease script cut short, e.g. by
#: Redis running out of memory) is idle longer than any lease can last: it is taken back like an ended lease.
_LEASE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
local limit = tonumber(ARGV[3])
local taken = {}
local ended = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, limit)
if #ended < limit then
  local idle = redis.call('XPENDING', KEYS[1], ARGV[4], 'IDLE', ARGV[6], '-', '+', limit - #ended)
  for _, pending in ipairs(idle) do
    if not redis.call('ZSCORE', KEYS[2], pending[1]) then table.insert(ended, pending[1]) end
  end
end
if #ended > 0 then
  redis.call('ZREM', KEYS[2], unpack(ended))
  local claimed = redis.call('XCLAIM', KEYS[1], ARGV[4], ARGV[5], 0, unpack(ended))
  for _, entry in ipairs(claimed) do
    if entry and entry[2] then table.insert(taken, entry) end
  end
end
if #taken < limit then
  local fresh = redis.call('XREADGROUP', 'GROUP', ARGV[4], ARGV[5], 'COUNT', limit - #taken, 'STREAMS', KEYS[1], '>')
  if fresh then
    for _, entry in ipairs(fresh[1][2]) do table.insert(taken, entry) end
  end
end
local out = {}
for _, entry in ipairs(taken) do
  redis.call('ZADD', KEYS[2], ARGV[2], entry[1])
  table.insert(out, {entry[1], entry[2], redis.call('HINCRBY', KEYS[3], entry[1], 1)})
end
return out
"""

#: KEYS: stream, ids, leases, deliveries. ARGV: group, task ids... Returns how many tasks were deleted.
_ACK = """
local done = 0
for i = 2, #ARGV do
  local id = redis.call('HGET', KEYS[2], ARGV[i])
  if id then
    redis.call('XACK', KEYS[1], ARGV[1], id)
    done = done + redis.call('XDEL', KEYS[1], id)
    redis.call('HDEL', KEYS[2], ARGV[i])
    redis.call('ZREM', KEYS[3], id)
    redis.call('HDEL', KEYS[4], id)
  end
end
return done
"""

#: KEYS: ids, leases. ARGV: now, task ids... Returns the task ids leased now.
_LEASED = """
local out = {}
for i = 2, #ARGV do
  local id = redis.call('HGET', KEYS[1], ARGV[i])
  if id then
    local until_ = redis.call('ZSCORE', KEYS[2], id)
    if until_ and tonumber(until_) > tonumber(ARGV[1]) then table.insert(out, ARGV[i]) end
  end
end
return out
"""


class RedisReviewQueue(BufferedTasks):
    """See the module docstring. `client`: a blocking redis-py client (`decode_responses` off). `offer` from
    the event loop; the rest from any thread."""

    def __init__(self, client: Any, *, prefix: str = "auditmesh", max_pending: int = MAX_PENDING_PER_TENANT,
                 max_buffer: int = MAX_BUFFER, retention_s: float = 30 * 86400.0,
                 clock: Callable[[], float] = time.time, orphan_after_s: float = MAX_VISIBILITY_S) -> None:
        self.max_pending = max_pending
        #: A delivered task in no lease (a lease script cut short) is taken back once idle this long: longer
        #: than any lease may last, so a task under a lease is never one.
        self.orphan_after_s = orphan_after_s
        self.retention_s = retention_s
        self._redis = client
        self._prefix = f"{prefix}:review"
        self._clock = clock
        self._flushing = threading.Lock()
        self._last_prune = 0.0
        self._buffer = TaskBuffer(max_buffer)
        self._add = client.register_script(_ADD)
        self._lease = client.register_script(_LEASE)
        self._ack = client.register_script(_ACK)
        self._leased = client.register_script(_LEASED)

    def _keys(self, tenant: str) -> tuple[str, str, str, str]:
        """(stream, ids, leases, deliveries) of `tenant`."""
        base = f"{self._prefix}:{{{tenant}}}"
        return f"{base}:stream", f"{base}:ids", f"{base}:leases", f"{base}:deliveries"

    @property
    def _tenants(self) -> str:
        return f"{self._prefix}:tenants"

    def put(self, record: AuditRecord, reason: str, task_id: str, created: float) -> None:
        """Write one task now under its own id and time (an appeal's), or raise: LimitExceededError when the
        tenant holds `max_pending` tasks. Writing the same id again changes nothing."""
        keys, args = self._add_call(record, reason, task_id, created)
        with unavailable():
            written = int(self._add(keys=keys, args=args))
        if written < 0:
            check_pending(record.tenant, self.max_pending, self.max_pending)

    def flush(self) -> int:
        """Write the buffered tasks in one pipeline; how many were stored. A tenant at its bound drops the rest of
        its tasks (counted); a write Redis refuses keeps them all for the next flush (UnavailableError). Old
        tasks are pruned."""
        with self._flushing:
            taken = self._buffer.take()
            if taken:
                try:
                    pipe = self._redis.pipeline(transaction=False)
                    for record, reason in taken:
                        keys, args = self._add_call(record, reason, record.audit_id, record.time)
                        self._add(keys=keys, args=args, client=pipe)
                    replies = pipe.execute(raise_on_error=False)
                except redis_errors() as error:  # Redis unreachable or slow: none is known written
                    self._buffer.give_back(taken)  # one written before the failure is not written twice: its id exists
                    raise UnavailableError(f"review tasks: Redis did not take the write ({error}); kept buffered") from None
                refused = [reply for reply in replies if isinstance(reply, Exception)]
                if refused:  # a task Redis answers with an error (a key of the wrong type) would never go: dropped
                    log.error("review tasks: Redis refused %d of %d: %s", len(refused), len(replies), refused[0])
                results = [int(reply) for reply in replies if not isinstance(reply, Exception)]
                self._buffer.drop(results.count(-1) + len(refused))
                stored = results.count(1)
            else:
                stored = 0
            try:
                self._prune()
            except redis_errors() as error:
                log.warning("review tasks: retention sweep failed (retried in %.0f s): %s", PRUNE_EVERY_S, error)
            return stored

    def _add_call(self, record: AuditRecord, reason: str, task_id: str, created: float) -> tuple[list[str], list[Any]]:
        """The keys and arguments of the add script for one task."""
        stream, ids, _, _ = self._keys(record.tenant)
        text = json.dumps(record.to_json_dict(), ensure_ascii=False, separators=(",", ":"))
        return [stream, ids, self._tenants], [task_id, reason, repr(created), text, self.max_pending, record.tenant, GROUP]

    def lease(self, tenant: str, *, limit: int, visibility_s: float) -> list[ReviewTask]:
        """Up to `limit` of `tenant`'s tasks not leased now (never delivered, or their lease ended), those whose
        lease ended first, leased for `visibility_s` seconds (see ReviewQueue.lease)."""
        check_lease(limit, visibility_s)
        now = self._clock()
        stream, _, leases, deliveries = self._keys(tenant)
        with unavailable():
            rows = self._lease(keys=[stream, leases, deliveries],
                               args=[repr(now), repr(now + visibility_s), limit, GROUP, CONSUMER, int(self.orphan_after_s * 1000)])
        tasks = []
        for entry_id, fields, delivered in sorted(rows, key=lambda row: _entry_order(row[0])):
            values = {fields[i].decode(): fields[i + 1] for i in range(0, len(fields), 2)}
            tasks.append(ReviewTask(values["task_id"].decode(), values["reason"].decode(), int(delivered),
                                    AuditRecord.from_json_dict(json.loads(values["record"]))))
        return tasks

    def ack(self, tenant: str, task_ids: Sequence[str]) -> int:
        """Delete `tenant`'s tasks named in `task_ids` (another tenant's ids match nothing); how many."""
        ids = check_ack(task_ids)
        if not ids:
            return 0
        with unavailable():
            return int(self._ack(keys=list(self._keys(tenant)), args=[GROUP, *ids]))

    def leased(self, tenant: str, task_ids: Sequence[str]) -> set[str]:
        """Which of `task_ids` are still `tenant`'s, leased now (delivered, not acked, lease not over)."""
        _, ids, leases, _ = self._keys(tenant)
        found: set[str] = set()
        chunk_ids = list(task_ids)
        with unavailable():
            for start in range(0, len(chunk_ids), 500):
                found.update(value.decode() for value in self._leased(keys=[ids, leases],
                                                                      args=[repr(self._clock()), *chunk_ids[start:start + 500]]))
        return found

    def pending(self, tenant: str) -> int:
        """`tenant`'s tasks not yet acked (written ones)."""
        with unavailable():
            return int(self._redis.xlen(self._keys(tenant)[0])) if self._redis.exists(self._keys(tenant)[0]) else 0

    def purge_tenant(self, tenant: str) -> int:
        """Delete every task of `tenant`, buffered ones written first; how many."""
        self.flush()
        count = self.pending(tenant)
        with unavailable():
            self._redis.delete(*self._keys(tenant))
            self._redis.srem(self._tenants, tenant)
        return count

    def close(self) -> None:
        try:
            self.flush()
        except UnavailableError as error:
            log.error("review tasks: %d could not be written to Redis before shutdown: %s", len(self._buffer), error)
        self._redis.close()

    def _prune(self) -> None:
        """Delete tasks created more than `retention_s` ago (every tenant's stream, oldest entries first)."""
        now = self._clock()
        if now - self._last_prune < PRUNE_EVERY_S:
            return
        self._last_prune = now
        cutoff = now - self.retention_s
        for raw in self._redis.smembers(self._tenants):
            tenant = raw.decode()
            stream = self._keys(tenant)[0]
            start = "-"
            while True:
                entries = self._redis.xrange(stream, min=start, max="+", count=500)
                old = [fields[b"task_id"].decode() for _, fields in entries if float(fields[b"created"]) < cutoff]
                if old:
                    self.ack(tenant, old)
                if len(entries) < 500 or not old:
                    break
                start = "(" + entries[-1][0].decode()


def _entry_order(entry_id: bytes) -> tuple[int, int]:
    """A stream entry id (b"<ms>-<seq>") as numbers: the order it was written in."""
    millis, _, sequence = entry_id.decode().partition("-")
    return int(millis), int(sequence or 0)


def redis_errors() -> tuple[type[BaseException], ...]:
    """What a Redis that is down, slow or refusing raises (redis-py's connection, timeout and reply errors)."""
    import redis

    return (redis.ConnectionError, redis.TimeoutError, redis.ResponseError)


@contextlib.contextmanager
def unavailable() -> Iterator[None]:
    """Redis's errors as UnavailableError (UNAVAILABLE: the caller may retry), never as a bug."""
    try:
        yield
    except redis_errors() as error:
        raise UnavailableError(f"review tasks: Redis is unavailable ({type(error).__name__}: {error})") from None


def persistence_warning(client: Any) -> str | None:
    """Why review tasks in this Redis would not survive its restart (neither AOF nor RDB snapshots), or None
    (also when Redis does not say: a managed Redis may hide its settings)."""
    try:
        info = client.info("persistence")
        saves = client.config_get("save").get("save", "x")
    except Exception:  # CONFIG may be disabled; INFO answered or not, nothing to say
        return None
    if int(info.get("aof_enabled", 0)) == 0 and not saves:
        return ("Redis persists nothing (appendonly no, no save points): review tasks in it are lost when it "
                "restarts; enable AOF or RDB, or keep review tasks in SQLite or PostgreSQL")
    return None
