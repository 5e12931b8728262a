"""Tenant-fair, priority-ordered queue of work items for one modality service. Pure: no asyncio, no
gRPC; time comes in as arguments.

Ordering:
* Strict priority between QoS classes (class 0 first), with a starvation guard: a class whose oldest
  item has waited `starvation_limit_s` gets a share of each batch (`starvation_share`, at least one
  item) ahead of the classes above it, so a flood of high-priority work cannot starve it forever.
* Batches are cut by bytes as well as by count (`max_bytes`): a job whose payload has an `nbytes`
  attribute counts that much, so a batch never exceeds what the upstream takes in one request, and
  big items cannot push small ones into a batch the upstream refuses.
* Inside a class, fairness between tenants in the spirit of VTC (Sheng et al., OSDI'24): each tenant
  has a virtual counter of the service it received (items / weight); the backlogged tenant with the
  smallest counter is served next. A tenant that becomes backlogged is lifted to the smallest counter
  among the backlogged tenants, so idling earns no credit, and a light tenant next to a flooding one
  is served within one batch.

Example::

    queue = FairQueue(starvation_limit_s=0.2)
    queue.push(Job("acme", priority=0, weight=1.0, deadline=now + 1, enqueued=now, payload=b"..."))
    batch, shed = queue.pop_batch(now, max_items=8, cost=estimate, max_bytes=32 << 20)
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from services.router.batch_cost import CostEstimate


@dataclass(eq=False)
class Job:
    """One item waiting for a modality service. Identity-compared; `payload` is opaque here."""

    tenant: str
    priority: int
    weight: float
    deadline: float
    enqueued: float
    payload: Any = None
    queued: bool = field(default=False, repr=False)
    #: Bytes this job adds to a batch (a payload's `nbytes`, when it has one; else 0).
    nbytes: int = 0

    def __post_init__(self) -> None:
        if not self.nbytes:
            self.nbytes = int(getattr(self.payload, "nbytes", 0) or 0)


@dataclass
class _Lane:
    """One class: per-tenant FIFO queues and VTC counters."""

    queues: dict[str, deque[Job]] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    last_served: float = 0.0
    size: int = 0

    def backlogged(self) -> list[str]:
        return [tenant for tenant, q in self.queues.items() if q]

    def push(self, job: Job) -> None:
        queue = self.queues.setdefault(job.tenant, deque())
        if not queue:  # becoming backlogged: lift the counter (no credit for idling)
            active = [self.counters[t] for t in self.backlogged() if t in self.counters]
            floor = min(active) if active else self.last_served
            self.counters[job.tenant] = max(self.counters.get(job.tenant, 0.0), floor)
        queue.append(job)
        self.size += 1

    def oldest(self) -> Job | None:
        heads = [q[0] for q in self.queues.values() if q]
        return min(heads, key=lambda j: j.enqueued) if heads else None

    def _next_tenant(self) -> str | None:
        tenants = self.backlogged()
        if not tenants:
            return None
        return min(tenants, key=lambda t: (self.counters.get(t, 0.0), self.queues[t][0].enqueued))

    def peek_fair(self) -> Job | None:
        """The job `pop_fair` would return, left queued."""
        tenant = self._next_tenant()
        return self.queues[tenant][0] if tenant is not None else None

    def pop_fair(self) -> Job | None:
        tenant = self._next_tenant()
        if tenant is None:
            return None
        job = self.queues[tenant].popleft()
        self.size -= 1
        self.counters[tenant] = self.counters.get(tenant, 0.0) + 1.0 / job.weight
        self.last_served = self.counters[tenant]
        return job

    def remove(self, job: Job) -> bool:
        queue = self.queues.get(job.tenant)
        if queue is None:
            return False
        try:
            queue.remove(job)
        except ValueError:
            return False
        self.size -= 1
        return True


@dataclass
class _Budget:
    """The bytes left in the batch being formed (no limit when `limit` is None)."""

    limit: int | None
    used: int = 0
    full: bool = False

    def take(self, nbytes: int, *, first: bool) -> bool:
        """Count `nbytes` in, if they fit (the first job of a batch always does); else mark the batch full."""
        if self.limit is not None and not first and self.used + nbytes > self.limit:
            self.full = True
            return False
        self.used += nbytes
        return True


class FairQueue:
    """See the module docstring. Not thread-safe; one event loop owns it."""

    def __init__(self, starvation_limit_s: float = 0.2, starvation_share: float = 0.25) -> None:
        if starvation_limit_s <= 0:
            raise ValueError(f"starvation_limit_s must be > 0, got {starvation_limit_s}")
        if not 0 < starvation_share <= 1:
            raise ValueError(f"starvation_share must be in (0, 1], got {starvation_share}")
        self.starvation_limit_s = starvation_limit_s
        self.starvation_share = starvation_share
        self._lanes: dict[int, _Lane] = {}

    def __len__(self) -> int:
        return sum(lane.size for lane in self._lanes.values())

    def depth(self, priority: int) -> int:
        lane = self._lanes.get(priority)
        return lane.size if lane else 0

    def push(self, job: Job) -> None:
        lane = self._lanes.get(job.priority)
        if lane is None:  # not setdefault: that would build a lane per push
            lane = self._lanes[job.priority] = _Lane()
        lane.push(job)
        job.queued = True

    def remove(self, job: Job) -> bool:
        """Take a job out (its caller gave up). True if it was still queued."""
        lane = self._lanes.get(job.priority)
        removed = lane.remove(job) if lane and job.queued else False
        job.queued = False
        return removed

    def oldest_enqueued(self) -> float | None:
        heads = [job for lane in self._lanes.values() if (job := lane.oldest()) is not None]
        return min(job.enqueued for job in heads) if heads else None

    def jobs_ahead(self, tenant: str, priority: int) -> int:
        """Items that would be served before a new item of `tenant` in `priority` (fair interleaving:
        all higher classes, plus in its own class up to this tenant's own backlog + 1 per tenant)."""
        higher = sum(lane.size for p, lane in self._lanes.items() if p < priority)
        lane = self._lanes.get(priority)
        if lane is None:
            return higher
        own = len(lane.queues.get(tenant, ()))
        return higher + sum(min(len(q), own + 1) for t, q in lane.queues.items() if t != tenant) + own

    def _starving(self, now: float) -> list[_Lane]:
        """Classes whose oldest item has waited past the starvation limit, oldest first."""
        starving: list[tuple[float, int]] = []
        for priority, lane in self._lanes.items():
            oldest = lane.oldest()
            if oldest is not None and now - oldest.enqueued >= self.starvation_limit_s:
                starving.append((oldest.enqueued, priority))
        return [self._lanes[priority] for _, priority in sorted(starving)]

    def pop_batch(self, now: float, max_items: int, cost: CostEstimate | None = None,
                  max_bytes: int | None = None) -> tuple[list[Job], list[Job]]:
        """Up to `max_items` jobs (and, with `max_bytes`, at most that many bytes of them) in service
        order, and the jobs shed because they cannot finish in time.

        Starving classes first get up to `starvation_share` of the batch (at least one item), then
        classes fill the rest in strict priority order. The byte budget stops the batch at the first
        job that would not fit (order is kept: a small job behind it waits too); a job bigger than the
        budget on its own goes alone. With a cost estimate, the batch is cut at the
        largest size whose predicted finish time (now + cost(n)) meets the deadline of every job in
        it; a job that could not finish even in a batch of one is shed. Jobs not taken stay queued.
        """
        if max_items < 1:
            raise ValueError(f"max_items must be >= 1, got {max_items}")
        if max_bytes is not None and max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1 (or None), got {max_bytes}")
        taken: list[Job] = []
        shed: list[Job] = []
        budget = _Budget(max_bytes)
        guaranteed = max(1, int(max_items * self.starvation_share))
        for lane in self._starving(now):
            self._take(lane, min(max_items, len(taken) + guaranteed), now, cost, taken, shed, budget)
        for _, lane in sorted(self._lanes.items()):
            self._take(lane, max_items, now, cost, taken, shed, budget)
        if cost is not None:
            taken = self._fit_deadlines(taken, now, cost)
        return taken, shed

    @staticmethod
    def _take(lane: _Lane, limit: int, now: float, cost: CostEstimate | None, taken: list[Job], shed: list[Job],
              budget: _Budget) -> None:
        while len(taken) < limit and not budget.full and (head := lane.peek_fair()) is not None:
            if cost is not None and head.deadline < now + cost.predict(1):
                lane.pop_fair()
                head.queued = False
                shed.append(head)
                continue
            if not budget.take(head.nbytes, first=not taken):
                return
            lane.pop_fair()
            head.queued = False
            taken.append(head)

    def _fit_deadlines(self, taken: list[Job], now: float, cost: CostEstimate) -> list[Job]:
        keep = len(taken)
        earliest = float("inf")
        for n, job in enumerate(taken, start=1):
            earliest = min(earliest, job.deadline)
            if earliest < now + cost.predict(n):
                keep = n - 1
                break
        for job in reversed(taken[keep:]):  # back to the front of their queues, order kept
            self._requeue_front(job)
        return taken[:keep]

    def _requeue_front(self, job: Job) -> None:
        lane = self._lanes[job.priority]
        lane.queues.setdefault(job.tenant, deque()).appendleft(job)
        lane.size += 1
        lane.counters[job.tenant] = lane.counters.get(job.tenant, 0.0) - 1.0 / job.weight
        job.queued = True

