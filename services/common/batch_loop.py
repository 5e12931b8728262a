"""The one batching loop of the mesh: many concurrent callers, one `run_batch` call per batch. Pure
asyncio, no gRPC; the monotonic clock is injected.

Both tiers use it: the modality services' `DynamicBatcher` (Triton priority levels,
`services.common.serving.leveled_queue`) and the router's `FairScheduler` (VTC fairness and deadline
cut, `services.router.fair_queue`). The loop owns what they share; the order in which queued work is
served is the queue policy's (`QueuePolicy`):

* `submit` queues entries with one future each and waits for all of them; a future is settled only
  through the "if not done" helpers, so a late result never overwrites an error or a cancel;
* a caller that goes away (cancelled) leaves the queue at once, and a batch drops any entry whose
  caller is already gone before it runs;
* the queue is bounded (`QueueFullError`); `close` stops intake (`BatcherClosedError`) and finishes
  every accepted entry;
* a batch is dispatched at once when none is running (an idle service never waits for the window);
  while another batch runs, the next waits until it is full or its oldest entry has waited
  `max_delay_s` (0: continuous batching, batches grow by themselves under load); `max_concurrency`
  batches run at a time;
* `urgent_slots` more batches may run beside those, of urgent entries only (the queue policy says
  which: `UrgentQueuePolicy`): while every ordinary slot is busy with a long batch of bulk work, a
  chat line that arrives starts at once in an urgent slot instead of waiting for the bulk batch;
* `run_batch` must return one result per entry, in order (else `BatchResultError` for all of them);
  an error settles every caller of the batch, and `on_batch` gets one `BatchReport` per batch;
* request context travels one way: each submit takes a snapshot of the caller's contextvars, and a
  batch runs in a copy of its first entry's snapshot, so request-scoped values (the active span, the
  log request id) reach `run_batch` and the calls it makes instead of the context `start` ran in.
  Values every entry needs (the span each one links to) are the entry's own typed fields.

Example::

    loop = BatchLoop(run_batch, LeveledQueue(starvation_limit_s=0.2), max_batch_size=32)
    loop.start()
    results = await loop.submit([Leveled("hello", priority=2, enqueued=time.monotonic())])
    await loop.close()
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Generic, Protocol, Sequence, TypeVar

from services.common.errors import BatcherClosedError, BatchResultError, DeadlineExceededError, QueueFullError

R = TypeVar("R")


class Queued(Protocol):
    """What the loop reads from a queued entry (for its report and the window)."""

    @property
    def enqueued(self) -> float:
        """When the entry was queued, on the loop's clock."""
        ...

    @property
    def priority(self) -> int:
        """Its urgency on the policy's scale (lower = sooner)."""
        ...


E = TypeVar("E", bound=Queued)


class QueuePolicy(Protocol[E]):
    """The order in which queued entries are served: the plug-in point of `BatchLoop`.

    `remove` takes out an entry whose caller gave up (False when it was no longer queued); `pop_batch`
    returns up to `max_items` entries to run now and the entries the policy refuses to run at all
    (shed, e.g. past their deadline), both taken out of the queue; `oldest_enqueued` is None when
    the queue is empty; `len` counts queued entries.
    """

    def push(self, entry: E) -> None: ...

    def remove(self, entry: E) -> bool: ...

    def pop_batch(self, now: float, max_items: int) -> tuple[Sequence[E], Sequence[E]]: ...

    def oldest_enqueued(self) -> float | None: ...

    def __len__(self) -> int: ...


class UrgentQueuePolicy(QueuePolicy[E], Protocol[E]):
    """A queue policy that can also serve its urgent entries alone (`BatchLoop`'s `urgent_slots`):
    `urgent_depth` counts them, `pop_urgent` returns up to `max_items` of them (and shed entries),
    oldest first, taken out of the queue."""

    def urgent_depth(self) -> int: ...

    def pop_urgent(self, now: float, max_items: int) -> tuple[Sequence[E], Sequence[E]]: ...


@dataclass
class BatchReport:
    """What the loop tells its owner about each batch it ran (telemetry, a cost fit)."""

    size: int
    queue_wait_s: float  # of the oldest entry
    run_s: float
    error: BaseException | None = None
    item_waits_s: tuple[float, ...] = ()  # each entry's wait from submit to the batch starting, in order
    top_priority: int = 0  # the most urgent entry's priority, on the queue policy's scale


def validate_batching(max_batch_size: int, max_delay_ms: float, max_queue: int, max_concurrency: int,
                      starvation_limit_ms: float) -> None:
    """The checks every batching config shares (the modality batcher's and the router's scheduler's)."""
    if max_batch_size < 1:
        raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
    if max_delay_ms < 0:
        raise ValueError(f"max_delay_ms must be >= 0, got {max_delay_ms}")
    if max_queue < max_batch_size:
        raise ValueError(f"max_queue ({max_queue}) must be >= max_batch_size ({max_batch_size})")
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
    if starvation_limit_ms <= 0:
        raise ValueError(f"starvation_limit_ms must be > 0, got {starvation_limit_ms}")


def _set_result_if_not_done(future: asyncio.Future[R], result: R) -> None:
    if not future.done():
        future.set_result(result)


def _set_exception_if_not_done(future: asyncio.Future[R], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


def _expire(futures: Sequence[asyncio.Future[R]]) -> None:
    for future in futures:
        _set_exception_if_not_done(future, TimeoutError("timed out waiting for the batch"))


def _deadline_shed(entry: object) -> BaseException:
    return DeadlineExceededError("shed: the item could no longer finish before its deadline")


#: A queued entry's caller: its future and the contextvars snapshot of its submit.
_Waiter = tuple[asyncio.Future[R], contextvars.Context]


class BatchLoop(Generic[E, R]):
    """Batches submitted entries into calls of `run_batch(list[E]) -> Sequence[R]`. See the module docstring.

    `owner` names what refuses work in the closed message ("the service", "the router"); `on_shed`
    gives the error a shed entry's caller gets (the default: DeadlineExceededError). `urgent_slots` > 0
    needs a queue that implements `UrgentQueuePolicy`.
    """

    def __init__(self, run_batch: Callable[[list[E]], Awaitable[Sequence[R]]], queue: QueuePolicy[E], *,
                 max_batch_size: int, max_delay_s: float = 0.0, max_queue: int = 4096, max_concurrency: int = 1,
                 clock: Callable[[], float] = time.monotonic, on_batch: Callable[[BatchReport], None] | None = None,
                 on_shed: Callable[[E], BaseException] = _deadline_shed, owner: str = "the service",
                 urgent_slots: int = 0) -> None:
        if urgent_slots < 0:
            raise ValueError(f"urgent_slots must be >= 0, got {urgent_slots}")
        if urgent_slots and not (hasattr(queue, "urgent_depth") and hasattr(queue, "pop_urgent")):
            raise TypeError(f"urgent_slots: {type(queue).__name__} cannot serve urgent entries alone")
        self._run_batch = run_batch
        self._queue = queue
        self.max_batch_size = max_batch_size
        self.max_delay_s = max_delay_s
        self.max_queue = max_queue
        self._clock = clock
        self._on_batch = on_batch
        self._on_shed = on_shed
        self._owner = owner
        self._waiting: dict[E, _Waiter[R]] = {}  # queued entries only; a batch takes its entries out
        self._wakeup = asyncio.Event()  # set on every submit, batch end and close
        self._free_slots = max_concurrency
        self._free_urgent_slots = urgent_slots
        self._running: set[asyncio.Task[None]] = set()
        self._loop_task: asyncio.Task[None] | None = None
        self._closing = False

    @property
    def queue_depth(self) -> int:
        """Entries accepted and not yet in a batch."""
        return len(self._queue)

    @property
    def running(self) -> int:
        """Batches running now."""
        return len(self._running)

    def start(self) -> None:
        """Start the dispatch loop (call from inside the event loop)."""
        if self._loop_task is None:
            self._loop_task = asyncio.get_running_loop().create_task(self._dispatch_loop())

    def check_intake(self, count: int) -> None:
        """Raise what `submit` would for `count` new entries: BatcherClosedError or QueueFullError."""
        if self._closing:
            raise BatcherClosedError(f"{self._owner} is shutting down and accepts no new work")
        queued = len(self._queue)
        if queued + count > self.max_queue:
            raise QueueFullError(f"queue full ({queued} items queued, limit {self.max_queue}); retry later")

    async def submit(self, entries: Sequence[E], timeout_s: float | None = None) -> list[R]:
        """Queue `entries` and wait for their results, in order. Cancelling the caller takes its
        queued entries out; an error of any entry's batch is raised (the rest are then dropped).
        With `timeout_s` (event-loop seconds), TimeoutError once that long has passed, the same way:
        one timer for the call, instead of `asyncio.wait_for`'s extra task per call."""
        self.check_intake(len(entries))
        loop = asyncio.get_running_loop()
        create_future = loop.create_future
        origin = contextvars.copy_context()
        waiting, push = self._waiting, self._queue.push
        futures: list[asyncio.Future[R]] = []
        for entry in entries:
            future: asyncio.Future[R] = create_future()
            waiting[entry] = (future, origin)
            push(entry)
            futures.append(future)
        self._wakeup.set()
        timer = loop.call_later(timeout_s, _expire, futures) if timeout_s is not None else None
        try:
            if len(futures) == 1:  # the common case: no gather
                return [await futures[0]]
            return list(await asyncio.gather(*futures))
        except BaseException:
            for entry, future in zip(entries, futures):
                future.cancel()
                if self._waiting.pop(entry, None) is not None:  # still queued
                    self._queue.remove(entry)
            raise
        finally:
            if timer is not None:
                timer.cancel()

    async def close(self) -> None:
        """Stop accepting work, finish every accepted entry, then stop the loop."""
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
                await self._sleep()
                continue
            if self._free_slots:
                self._free_slots -= 1
                await self._wait_for_batch()
                self._start(*self._take_batch(False), urgent=False)
            elif self._free_urgent_slots and self._urgent_queue().urgent_depth():
                self._free_urgent_slots -= 1
                self._start(*self._take_batch(True), urgent=True)
            else:
                await self._sleep()  # until a batch ends or new work arrives

    async def _sleep(self) -> None:
        self._wakeup.clear()
        await self._wakeup.wait()

    def _urgent_queue(self) -> UrgentQueuePolicy[E]:
        return self._queue  # type: ignore[return-value]  # checked in __init__

    def _start(self, batch: list[E], futures: list[asyncio.Future[R]], origin: contextvars.Context, *,
               urgent: bool) -> None:
        if not batch:
            self._release(urgent)
            return
        # A copy: two batches may start with entries of one submit, and each may set values.
        task = asyncio.get_running_loop().create_task(self._run(batch, futures, urgent), context=origin.copy())
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    def _release(self, urgent: bool) -> None:
        if urgent:
            self._free_urgent_slots += 1
        else:
            self._free_slots += 1
        self._wakeup.set()

    async def _wait_for_batch(self) -> None:
        """While another batch runs, wait until the next one is full or its oldest entry waited the window."""
        # The window only pays off while other batches are running (work is arriving); an idle
        # service dispatches at once, so there is no fixed-window penalty at low load.
        window = self.max_delay_s
        while self._running and window > 0 and not self._closing and len(self._queue) < self.max_batch_size:
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

    def _take_batch(self, urgent: bool) -> tuple[list[E], list[asyncio.Future[R]], contextvars.Context]:
        """The policy's next batch (of urgent entries only if `urgent`) without entries whose caller is
        gone; shed entries are settled here."""
        pop = self._urgent_queue().pop_urgent if urgent else self._queue.pop_batch
        entries, shed = pop(self._clock(), self.max_batch_size)
        for entry in shed:
            waiter = self._waiting.pop(entry, None)
            if waiter is not None:
                _set_exception_if_not_done(waiter[0], self._on_shed(entry))
        batch: list[E] = []
        futures: list[asyncio.Future[R]] = []
        origin: contextvars.Context | None = None
        for entry in entries:
            waiter = self._waiting.pop(entry, None)
            if waiter is None or waiter[0].done():  # cancelled after the policy last saw it
                continue
            batch.append(entry)
            futures.append(waiter[0])
            if origin is None:
                origin = waiter[1]
        return batch, futures, origin if origin is not None else contextvars.Context()

    async def _run(self, batch: list[E], futures: list[asyncio.Future[R]], urgent: bool) -> None:
        started = self._clock()
        waits = tuple(started - entry.enqueued for entry in batch)
        report = BatchReport(len(batch), max(waits), 0.0, item_waits_s=waits,
                             top_priority=min(entry.priority for entry in batch))
        try:
            results = await self._run_batch(batch)
            if len(results) != len(batch):
                raise BatchResultError(f"run_batch returned {len(results)} results for {len(batch)} items")
            for future, result in zip(futures, results):
                _set_result_if_not_done(future, result)
        except BaseException as error:  # settle every caller; the caller maps the error to a status
            report.error = error
            for future in futures:
                _set_exception_if_not_done(future, error)
            if isinstance(error, asyncio.CancelledError):
                raise
        finally:
            report.run_s = self._clock() - started
            self._release(urgent)
            if self._on_batch is not None:
                self._on_batch(report)
