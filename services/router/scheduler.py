"""The router's per-modality scheduler: tenant-fair, priority-ordered, deadline-aware dynamic batching.

Pure asyncio around `FairQueue` (ordering) and `BatchCost` (duration ≈ a·n + b, learned online); no
gRPC. The clock is injected. Callers `submit` jobs and await results; one dispatch loop forms batches:

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

import asyncio
import contextvars
import functools
import math
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Generic, Sequence, TypeVar

from services.common.serving.batcher import validate_batching
from services.common.errors import BatcherClosedError, QueueFullError
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
        validate_batching(self.max_batch_size, self.max_delay_ms, self.max_queue, self.max_concurrency)
        if self.max_batch_bytes < 0:
            raise ValueError(f"max_batch_bytes must be >= 0 (0 = no byte budget), got {self.max_batch_bytes}")
        if self.starvation_limit_ms <= 0:
            raise ValueError(f"starvation_limit_ms must be > 0, got {self.starvation_limit_ms}")
        if self.overload_wait_ms < 0:
            raise ValueError(f"overload_wait_ms must be >= 0 (0 = never degrade), got {self.overload_wait_ms}")


@dataclass(frozen=True)
class Requester:
    """Who is asking: the tenant, its class priority (0 = highest) and its fair-share weight."""

    tenant: str
    priority: int = 1
    weight: float = 1.0


@dataclass
class BatchRun:
    """What one dispatched batch was (for the caller's telemetry and the cost fit)."""

    size: int
    top_priority: int
    queue_wait_s: float
    run_s: float = 0.0


class FairScheduler(Generic[R]):
    """See the module docstring. `run_batch(jobs)` returns one result per job, in order."""

    def __init__(self, run_batch: Callable[[list[Job]], Awaitable[Sequence[R]]], *, config: SchedulingConfig,
                 clock: Callable[[], float] = time.monotonic,
                 on_batch: Callable[[BatchRun], None] | None = None) -> None:
        self.config = config
        self._run_batch = run_batch
        self._clock = clock
        self._on_batch = on_batch
        self._queue = FairQueue(starvation_limit_s=config.starvation_limit_ms / 1000.0)
        self.cost = BatchCost()
        self._futures: dict[Job, asyncio.Future[R]] = {}
        self._origins: dict[Job, contextvars.Context] = {}
        self._wakeup = asyncio.Event()
        self._slots = asyncio.Semaphore(config.max_concurrency)
        self._running: set[asyncio.Task[None]] = set()
        self._loop_task: asyncio.Task[None] | None = None
        self._closing = False
        self.shed_count = 0

    @property
    def queue_depth(self) -> int:
        return len(self._queue)

    def start(self) -> None:
        if self._loop_task is None:
            self._loop_task = asyncio.get_running_loop().create_task(self._dispatch_loop())

    def expected_wait_s(self, requester: Requester, items: int = 1) -> float:
        """Predicted time until `items` new items of `requester` would be answered (0 without a cost fit)."""
        estimate = self.cost.estimate()
        if estimate is None:
            return 0.0
        ahead = self._queue.jobs_ahead(requester.tenant, requester.priority) + items
        size = min(self.config.max_batch_size, ahead)
        batches = math.ceil(ahead / size) + (1 if self._running else 0)
        return batches * estimate.predict(size)

    def overloaded(self, requester: Requester) -> bool:
        """True when the configured overload wait is set and this requester's expected wait exceeds it."""
        limit = self.config.overload_wait_ms
        return limit > 0 and self.expected_wait_s(requester) * 1000.0 > limit

    async def submit(self, requester: Requester, payloads: Sequence[Any], deadline: float) -> list[R]:
        """Queue one job per payload and wait for their results (see module docstring for errors)."""
        if self._closing:
            raise BatcherClosedError("the router is shutting down and accepts no new work")
        if len(self._queue) + len(payloads) > self.config.max_queue:
            raise QueueFullError(f"queue full ({len(self._queue)} items queued, limit {self.config.max_queue}); retry later")
        now = self._clock()
        if self.config.shed_early:
            expected = self.expected_wait_s(requester, len(payloads))
            if now + expected > deadline:
                self.shed_count += len(payloads)
                raise DeadlineExceededError(f"shed early: the expected wait of {expected * 1000:.0f} ms is longer than "
                                            f"the {max(deadline - now, 0) * 1000:.0f} ms left before the deadline")
        loop = asyncio.get_running_loop()
        jobs = [Job(requester.tenant, requester.priority, requester.weight, deadline, now, payload) for payload in payloads]
        futures = []
        origin = contextvars.copy_context()
        for job in jobs:
            future: asyncio.Future[R] = loop.create_future()
            future.add_done_callback(functools.partial(self._forget, job))
            self._futures[job] = future
            self._origins[job] = origin
            self._queue.push(job)
            futures.append(future)
        self._wakeup.set()
        try:
            return list(await asyncio.gather(*futures))
        except BaseException:
            for future in futures:
                future.cancel()
            raise

    def _forget(self, job: Job, future: asyncio.Future[R]) -> None:
        """Done callback: a cancelled job leaves the queue at once."""
        self._futures.pop(job, None)
        self._origins.pop(job, None)
        if future.cancelled():
            self._queue.remove(job)

    async def close(self) -> None:
        """Stop intake, finish every accepted job, stop the loop."""
        self._closing = True
        self._wakeup.set()
        if self._loop_task is not None:
            await self._loop_task
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)

    async def _dispatch_loop(self) -> None:
        while True:
            if not len(self._queue):
                if self._closing:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            await self._slots.acquire()
            await self._wait_for_batch()
            now = self._clock()
            batch, shed = self._queue.pop_batch(now, self.config.max_batch_size, self.cost.estimate(),
                                                max_bytes=self.config.max_batch_bytes or None)
            for job in shed:
                self.shed_count += 1
                self._fail(job, DeadlineExceededError("shed: the item could no longer finish before its deadline"))
            if not batch:
                self._slots.release()
                continue
            origin = self._origins.get(batch[0])  # copied: two batches may start with jobs of one submit
            task = asyncio.get_running_loop().create_task(self._run(batch, now),
                                                          context=origin.copy() if origin is not None else None)
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _wait_for_batch(self) -> None:
        """While another batch runs, wait until the next one is full or its oldest item waited the window."""
        window = self.config.max_delay_ms / 1000.0
        while self._running and window > 0 and not self._closing and len(self._queue) < self.config.max_batch_size:
            oldest = self._queue.oldest_enqueued()
            if oldest is None:
                return
            remaining = oldest + window - self._clock()
            if remaining <= 0:
                return
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), remaining)
            except asyncio.TimeoutError:
                return

    def _fail(self, job: Job, error: BaseException) -> None:
        future = self._futures.get(job)
        if future is not None and not future.done():
            future.set_exception(error)

    async def _run(self, batch: list[Job], formed_at: float) -> None:
        started = self._clock()
        report = BatchRun(len(batch), min(j.priority for j in batch), started - min(j.enqueued for j in batch))
        futures = [self._futures.get(job) for job in batch]
        try:
            results = await self._run_batch(batch)
            if len(results) != len(batch):
                raise RuntimeError(f"run_batch returned {len(results)} results for {len(batch)} jobs")
            report.run_s = self._clock() - started
            self.cost.observe(len(batch), report.run_s)
            for future, result in zip(futures, results):
                if future is not None and not future.done():
                    future.set_result(result)
        except BaseException as error:  # settle every caller; they map the error to a status
            for future in futures:
                if future is not None and not future.done():
                    future.set_exception(error)
            if isinstance(error, asyncio.CancelledError):
                raise
        finally:
            self._slots.release()
            if self._on_batch is not None:
                self._on_batch(report)
