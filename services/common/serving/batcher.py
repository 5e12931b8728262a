"""Dynamic batching: many concurrent callers, one model call per batch. Pure asyncio, no gRPC.

Callers `submit` items and await their results; a single dispatch loop forms batches and hands them
to `run_batch`. A batch is dispatched when it is full (`max_batch_size`), when the oldest item has
waited `max_delay_ms` while another batch is running, or at once when no batch is running (an idle
service never waits for the window). With `max_delay_ms` 0 this is continuous batching: while a batch
runs, new items queue up and form the next one, so batches grow by themselves under load. `max_concurrency` batches may run at
the same time (1 for a local CPU model; more for a remote service).

Priorities (Triton's dynamic-batcher semantics, so the router's KServe `priority` request
parameter means the same to our services and to a Triton server): a submit may carry a priority
level, lower = more urgent; 0 means unset and counts as `DEFAULT_PRIORITY`. Batches take the most
urgent items first, oldest first within a level; an item that has waited `starvation_limit_ms` goes
first whatever its level, so a busy urgent level cannot starve the others.

Every item has one future, settled only through the "if not done" helpers; items whose caller has
gone away (cancelled) are dropped before their batch runs. The queue is bounded: `submit` raises
QueueFullError instead of growing without limit. `close` stops intake and finishes what was accepted.

Example::

    batcher = DynamicBatcher(run_batch=score_texts, config=BatchingConfig(max_batch_size=32))
    batcher.start()
    scores = await batcher.submit(["hello", "world"])
    await batcher.close()
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Generic, Iterator, Sequence, TypeVar
from services.common.errors import BatcherClosedError, BatchResultError, QueueFullError

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class BatchingConfig:
    """How a batcher forms batches. See the module docstring."""

    max_batch_size: int = 32
    max_delay_ms: float = 0.0
    max_queue: int = 4096
    max_concurrency: int = 1
    starvation_limit_ms: float = 200.0
    #: Batches of at most this many items run on the event loop's own thread instead of a worker
    #: thread: for a model that takes a fraction of a millisecond, the two thread hand-offs cost more
    #: than the model (used by the modality services' ModelRunner; 0 = always a worker thread).
    inline_max_batch_size: int = 0

    def __post_init__(self) -> None:
        validate_batching(self.max_batch_size, self.max_delay_ms, self.max_queue, self.max_concurrency)
        if self.starvation_limit_ms <= 0:
            raise ValueError(f"starvation_limit_ms must be > 0, got {self.starvation_limit_ms}")
        if self.inline_max_batch_size < 0:
            raise ValueError(f"inline_max_batch_size must be >= 0 (0 = never inline), got {self.inline_max_batch_size}")


def validate_batching(max_batch_size: int, max_delay_ms: float, max_queue: int, max_concurrency: int) -> None:
    """The checks every batching config shares (this batcher's and the router's scheduler's)."""
    if max_batch_size < 1:
        raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
    if max_delay_ms < 0:
        raise ValueError(f"max_delay_ms must be >= 0, got {max_delay_ms}")
    if max_queue < max_batch_size:
        raise ValueError(f"max_queue ({max_queue}) must be >= max_batch_size ({max_batch_size})")
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")


@dataclass
class BatchReport:
    """What the dispatch loop tells the caller about each batch it ran (for telemetry)."""

    size: int
    queue_wait_s: float  # of the oldest item
    run_s: float
    error: BaseException | None = None
    item_waits_s: tuple[float, ...] = ()  # each item's wait from submit to the batch starting, in order


#: The level of a submit without a priority (the router sends realtime 1, standard 2, bulk 3).
DEFAULT_PRIORITY = 2
#: Levels as a model config reports them (Triton's `priority_levels`); higher values are still
#: accepted and ordered after these.
PRIORITY_LEVELS = 3


@dataclass
class _Pending(Generic[T, R]):
    value: T
    future: asyncio.Future[R]
    enqueued: float = field(default_factory=time.monotonic)


class _LeveledQueue(Generic[T, R]):
    """FIFO queues per priority level; `popleft` serves the most urgent level, unless some level's
    oldest item has waited `starvation_limit_s` (then the level with the oldest head goes first)."""

    def __init__(self, starvation_limit_s: float, clock: Callable[[], float]) -> None:
        self._levels: dict[int, deque[_Pending[T, R]]] = {}
        self._size = 0
        self._starvation_limit_s = starvation_limit_s
        self._clock = clock

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[_Pending[T, R]]:
        for level in sorted(self._levels):
            yield from self._levels[level]

    def extend(self, level: int, items: Sequence[_Pending[T, R]]) -> None:
        self._levels.setdefault(level, deque()).extend(items)
        self._size += len(items)

    def oldest_enqueued(self) -> float:
        return min(queue[0].enqueued for queue in self._levels.values())

    def popleft(self) -> _Pending[T, R]:
        levels = sorted(self._levels)
        chosen = levels[0]
        if len(levels) > 1:
            starving = min(levels, key=lambda level: self._levels[level][0].enqueued)
            if self._clock() - self._levels[starving][0].enqueued >= self._starvation_limit_s:
                chosen = starving
        queue = self._levels[chosen]
        item = queue.popleft()
        if not queue:
            del self._levels[chosen]
        self._size -= 1
        return item


def _set_result_if_not_done(future: asyncio.Future[R], result: R) -> None:
    if not future.done():
        future.set_result(result)


def _set_exception_if_not_done(future: asyncio.Future[R], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


class DynamicBatcher(Generic[T, R]):
    """Batches submitted items into calls of `run_batch(list[T]) -> list[R]` (same order, same length)."""

    def __init__(self, run_batch: Callable[[list[T]], Awaitable[Sequence[R]]], *, config: BatchingConfig,
                 on_batch: Callable[[BatchReport], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._run_batch = run_batch
        self.config = config
        self._on_batch = on_batch
        self._clock = clock
        self._queue: _LeveledQueue[T, R] = _LeveledQueue(config.starvation_limit_ms / 1000.0, clock)
        self._wakeup = asyncio.Event()
        self._slots = asyncio.Semaphore(config.max_concurrency)
        self._running: set[asyncio.Task[None]] = set()
        self._loop_task: asyncio.Task[None] | None = None
        self._closing = False

    @property
    def queue_depth(self) -> int:
        """Items accepted and not yet dispatched."""
        return len(self._queue)

    def start(self) -> None:
        """Start the dispatch loop (call from inside the event loop)."""
        if self._loop_task is None:
            self._loop_task = asyncio.get_running_loop().create_task(self._dispatch_loop())

    async def submit(self, values: Sequence[T], priority: int = 0) -> list[R]:
        """Queue `values` at `priority` (lower = sooner; 0 = DEFAULT_PRIORITY) and wait for all their
        results. Cancelling the caller drops its queued items."""
        if self._closing:
            raise BatcherClosedError("the service is shutting down and accepts no new work")
        if len(self._queue) + len(values) > self.config.max_queue:
            raise QueueFullError(f"queue full ({len(self._queue)} queued, limit {self.config.max_queue}); retry later")
        loop = asyncio.get_running_loop()
        pending = [_Pending[T, R](value, loop.create_future(), self._clock()) for value in values]
        self._queue.extend(priority or DEFAULT_PRIORITY, pending)
        self._wakeup.set()
        try:
            return list(await asyncio.gather(*(p.future for p in pending)))
        except BaseException:
            for item in pending:
                item.future.cancel()
            raise

    async def close(self) -> None:
        """Stop accepting work, finish every accepted item, then stop the loop."""
        self._closing = True
        self._wakeup.set()
        if self._loop_task is not None:
            await self._loop_task
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)

    async def _dispatch_loop(self) -> None:
        while True:
            if not self._queue:
                if self._closing:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            await self._slots.acquire()
            batch = await self._form_batch()
            if not batch:
                self._slots.release()
                continue
            task = asyncio.get_running_loop().create_task(self._run(batch))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _form_batch(self) -> list[_Pending[T, R]]:
        """Take up to max_batch_size live items, waiting up to the window for more when configured."""
        # The window only pays off while other batches are running (work is arriving); an idle
        # service dispatches at once, so there is no fixed-window penalty at low load.
        if self.config.max_delay_ms > 0 and self._queue and self._running and not self._closing:
            deadline = self._queue.oldest_enqueued() + self.config.max_delay_ms / 1000.0
            while len(self._live()) < self.config.max_batch_size and not self._closing:
                remaining = deadline - self._clock()
                if remaining <= 0:
                    break
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(), remaining)
                except asyncio.TimeoutError:
                    break
        batch: list[_Pending[T, R]] = []
        while self._queue and len(batch) < self.config.max_batch_size:
            item = self._queue.popleft()
            if not item.future.done():  # cancelled callers leave the batch here
                batch.append(item)
        return batch

    def _live(self) -> list[_Pending[T, R]]:
        return [item for item in self._queue if not item.future.done()]

    async def _run(self, batch: list[_Pending[T, R]]) -> None:
        started = self._clock()
        report = BatchReport(len(batch), started - batch[0].enqueued, 0.0,
                             item_waits_s=tuple(started - item.enqueued for item in batch))
        try:
            results = await self._run_batch([item.value for item in batch])
            if len(results) != len(batch):
                raise BatchResultError(f"run_batch returned {len(results)} results for {len(batch)} items")
            for item, result in zip(batch, results):
                _set_result_if_not_done(item.future, result)
        except BaseException as error:  # settle every caller; the caller maps the error to a status
            report.error = error
            for item in batch:
                _set_exception_if_not_done(item.future, error)
            if isinstance(error, asyncio.CancelledError):
                raise
        finally:
            report.run_s = self._clock() - started
            self._slots.release()
            if self._on_batch is not None:
                self._on_batch(report)
