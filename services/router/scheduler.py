"""The router's per-modality scheduler: tenant-fair, priority-ordered, deadline-aware dynamic batching.

Pure asyncio, no gRPC: `services.common.batch_loop.BatchLoop` (the one batching loop) over `FairQueue`
(ordering), with `BatchCost` (duration ≈ a·n + b, learned online) cutting each batch to its
deadlines. The clock is injected. Callers `submit` jobs and await results; one dispatch loop forms
batches:

* an idle service (no batch running) gets work at once: no fixed-window penalty at low load;
* while a batch runs, the next one is dispatched when it is full or its oldest item has waited
  `max_delay_ms`;
* the batch is cut so that every item in it can still meet its deadline (predicted from the cost fit);
  an item that cannot is shed with DeadlineExceededError instead of being computed and thrown away;
* at submit, an item whose deadline cannot cover its expected queue wait plus service time is
  rejected at once (`shed_early`);
* a caller that goes away (cancelled) leaves the queue at once; the queue is bounded (QueueFullError);
* a batch runs in a copy of the contextvars context its first job was submitted from, so
  request-scoped context (the active trace span, a log field) reaches `run_batch` and the downstream
  call, instead of the context `start` was called from.

Example::

    scheduler = FairScheduler(run_batch, config=SchedulingConfig(max_batch_size=16))
    scheduler.start()
    rows = await scheduler.submit(Requester("acme", priority=0), [payload], deadline=clock() + 0.5)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Generic, Sequence, TypeVar

from services.common.batch_loop import BatchLoop, BatchReport, validate_batching
from services.common.errors import DeadlineExceededError
from services.router.batch_cost import BatchCost
from services.router.fair_queue import FairQueue, Job

R = TypeVar("R")


@dataclass(frozen=True)
class SchedulingConfig:
    """Per upstream: batch size, window, queue bound, concurrency, starvation guard, shedding."""

    max_batch_size: int = 32
    max_delay_ms: float = 15.0
    max_queue: int = 4096
    max_concurrency: int = 2
    starvation_limit_ms: float = 200.0
    shed_early: bool = True
    overload_wait_ms: float = 0.0
    #: Bytes of payload per batch (jobs whose payload has `nbytes`); 0 = count only. The dispatcher
    #: sets it to the upstream's `limits.max_request_bytes` unless set here.
    max_batch_bytes: int = 0

    def __post_init__(self) -> None:
        validate_batching(self.max_batch_size, self.max_delay_ms, self.max_queue, self.max_concurrency,
                          self.starvation_limit_ms)
        if self.max_batch_bytes < 0:
            raise ValueError(f"max_batch_bytes must be >= 0 (0 = no byte budget), got {self.max_batch_bytes}")
        if self.overload_wait_ms < 0:
            raise ValueError(f"overload_wait_ms must be >= 0 (0 = never degrade), got {self.overload_wait_ms}")


@dataclass(frozen=True)
class Requester:
    """Who is asking: the tenant, its class priority (0 = highest) and its fair-share weight."""

    tenant: str
    priority: int = 1
    weight: float = 1.0


class _DeadlineCutQueue:
    """`FairQueue` as the loop's queue policy: each batch is cut with the scheduler's current cost fit,
    and to `max_bytes` of payload (None = count only). Until a finished batch backs the fit (the
    service's warm-run prior alone), batches are neither cut nor shed at batch time: the prior may be
    wrong, and only a batch that runs can correct it.
    (Further `pop_batch` options of the fair queue are passed here.)"""

    def __init__(self, queue: FairQueue, cost: BatchCost, max_bytes: int | None = None) -> None:
        self._queue = queue
        self._cost = cost
        self._max_bytes = max_bytes

    def __len__(self) -> int:
        return len(self._queue)

    def push(self, job: Job) -> None:
        self._queue.push(job)

    def remove(self, job: Job) -> bool:
        return self._queue.remove(job)

    def oldest_enqueued(self) -> float | None:
        return self._queue.oldest_enqueued()

    def pop_batch(self, now: float, max_items: int) -> tuple[list[Job], list[Job]]:
        cost = self._cost.estimate() if self._cost.observed else None
        return self._queue.pop_batch(now, max_items, cost=cost, max_bytes=self._max_bytes)


class FairScheduler(Generic[R]):
    """See the module docstring. `run_batch(jobs)` returns one result per job, in order; `on_batch`
    gets one `BatchReport` per batch (`top_priority`: the highest class in it)."""

    def __init__(self, run_batch: Callable[[list[Job]], Awaitable[Sequence[R]]], *, config: SchedulingConfig,
                 clock: Callable[[], float] = time.monotonic,
                 on_batch: Callable[[BatchReport], None] | None = None) -> None:
        self.config = config
        self._clock = clock
        self._on_batch = on_batch
        self._queue = FairQueue(starvation_limit_s=config.starvation_limit_ms / 1000.0)
        self.cost = BatchCost(clock=clock)
        self.shed_count = 0
        self._loop: BatchLoop[Job, R] = BatchLoop(
            run_batch, _DeadlineCutQueue(self._queue, self.cost, config.max_batch_bytes or None), max_batch_size=config.max_batch_size,
            max_delay_s=config.max_delay_ms / 1000.0, max_queue=config.max_queue,
            max_concurrency=config.max_concurrency, clock=clock, on_batch=self._observe, on_shed=self._shed,
            owner="the router")

    @property
    def queue_depth(self) -> int:
        """Jobs queued and not yet in a batch."""
        return self._loop.queue_depth

    def start(self) -> None:
        """Start the dispatch loop (call from inside the event loop)."""
        self._loop.start()

    async def close(self) -> None:
        """Stop intake, finish every accepted job, stop the loop."""
        await self._loop.close()

    def expected_wait_s(self, requester: Requester, items: int = 1) -> float:
        """Predicted time until `items` new items of `requester` would be answered (0 without a cost fit).

        The batches ahead (those queued before these items, these items' own, and the ones running)
        are served `max_concurrency` at a time, each taking what the fit predicts (the fit learns from
        round trips, so a batch that waited in the service is already counted as longer)."""
        estimate = self.cost.estimate()
        if estimate is None:
            return 0.0
        ahead = self._queue.jobs_ahead(requester.tenant, requester.priority) + items
        size = min(self.config.max_batch_size, ahead)
        batches = math.ceil(ahead / size) + self._loop.running
        return math.ceil(batches / self.config.max_concurrency) * estimate.predict(size)

    def _must_shed(self, requester: Requester, items: int, left_s: float) -> float | None:
        """The expected wait when it is longer than `left_s` and there is work ahead to wait for; None
        otherwise. With nothing queued ahead and a batch slot free the items are sent at once: no
        estimate, however pessimistic, may refuse work the upstream is idle for."""
        if self._queue.jobs_ahead(requester.tenant, requester.priority) == 0 \
                and self._loop.running < self.config.max_concurrency:
            return None
        expected = self.expected_wait_s(requester, items)
        return expected if expected > left_s else None

    def overloaded(self, requester: Requester) -> bool:
        """True when the configured overload wait is set and this requester's expected wait exceeds it."""
        limit = self.config.overload_wait_ms
        return limit > 0 and self.expected_wait_s(requester) * 1000.0 > limit

    async def submit(self, requester: Requester, payloads: Sequence[Any], deadline: float,
                     timeout_s: float | None = None) -> list[R]:
        """Queue one job per payload and wait for their results (see module docstring for errors);
        TimeoutError after `timeout_s` event-loop seconds (`BatchLoop.submit`), when given."""
        self._loop.check_intake(len(payloads))
        now = self._clock()
        if self.config.shed_early:
            expected = self._must_shed(requester, len(payloads), deadline - now)
            if expected is not None:
                self.shed_count += len(payloads)
                raise DeadlineExceededError(f"shed early: the expected wait of {expected * 1000:.0f} ms is longer than "
                                            f"the {max(deadline - now, 0) * 1000:.0f} ms left before the deadline")
        jobs = [Job(requester.tenant, requester.priority, requester.weight, deadline, now, payload) for payload in payloads]
        return await self._loop.submit(jobs, timeout_s)

    def _shed(self, job: Job) -> BaseException:
        self.shed_count += 1
        return DeadlineExceededError("shed: the item could no longer finish before its deadline")

    def _observe(self, report: BatchReport) -> None:
        if report.error is None:  # a failed batch says nothing about how long a batch takes
            self.cost.observe(report.size, report.run_s)
        if self._on_batch is not None:
            self._on_batch(report)
