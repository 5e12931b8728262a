"""Dynamic batching for the modality services: many concurrent callers, one model call per batch.
Pure asyncio, no gRPC: the configuration and wiring of `services.common.batch_loop.BatchLoop` (the
one batching loop) over `services.common.serving.leveled_queue.LeveledQueue`.

Callers `submit` items and await their results; a single dispatch loop forms batches and hands them
to `run_batch`. A batch is dispatched when it is full (`max_batch_size`), when the oldest item has
waited `max_delay_ms` while another batch is running, or at once when no batch is running (an idle
service never waits for the window). With `max_delay_ms` 0 this is continuous batching: while a batch
runs, new items queue up and form the next one, so batches grow by themselves under load.
`max_concurrency` batches may run at the same time (1 for a local CPU model; more for a remote service).
`urgent_concurrency` more may run beside them, each of items at `urgent_priority` or more urgent only
(the router sends realtime as 1): a chat line never waits for a long bulk batch to finish.

Priorities (Triton's dynamic-batcher semantics, so the router's KServe `priority` request
parameter means the same to our services and to a Triton server): a submit may carry a priority
level, lower = more urgent; 0 means unset and counts as `DEFAULT_PRIORITY`. Batches take the most
urgent items first, oldest first within a level; an item that has waited `starvation_limit_ms` goes
first whatever its level, so a busy urgent level cannot starve the others.

Every item has one future, settled only through the "if not done" helpers; an item whose caller has
gone away (cancelled) leaves the queue at once. A batch runs in a copy of its first caller's
contextvars (`batch_loop`). The queue is bounded: `submit` raises QueueFullError instead of growing
without limit. `close` stops intake and finishes what was accepted.

Example::

    batcher = DynamicBatcher(run_batch=score_texts, config=BatchingConfig(max_batch_size=32))
    batcher.start()
    scores = await batcher.submit(["hello", "world"])
    await batcher.close()
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Generic, Sequence, TypeVar

from services.common.batch_loop import BatchLoop, BatchReport, validate_batching
from services.common.serving.leveled_queue import Leveled, LeveledQueue

__all__ = ["BatchReport", "BatchingConfig", "DEFAULT_PRIORITY", "DynamicBatcher", "PRIORITY_LEVELS"]

T = TypeVar("T")
R = TypeVar("R")

#: The level of a submit without a priority (the router sends realtime 1, standard 2, bulk 3).
DEFAULT_PRIORITY = 2
#: Levels as a model config reports them (Triton's `priority_levels`); higher values are still
#: accepted and ordered after these.
PRIORITY_LEVELS = 3


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
    #: Batches that may run beside the `max_concurrency` ones, of items at `urgent_priority` or lower
    #: (more urgent) only: while bulk work fills every ordinary slot, a realtime item starts at once.
    urgent_concurrency: int = 0
    urgent_priority: int = 1
    #: Batches whose most urgent item is at `background_priority` or later (bulk is 3) run on worker
    #: threads this much nicer than the service (ModelRunner), so the kernel gives the CPU to realtime
    #: and standard batches first while bulk work saturates it (0 = same priority as everything else).
    background_nice: int = 0
    background_priority: int = PRIORITY_LEVELS
    #: How long a thread running Python keeps the interpreter lock while another thread wants it
    #: (`sys.setswitchinterval`, set by the service at start; Python's default is 5 ms): the longest a
    #: realtime batch's thread waits for a bulk batch's thread at each switch.
    gil_switch_interval_ms: float = 5.0

    def __post_init__(self) -> None:
        validate_batching(self.max_batch_size, self.max_delay_ms, self.max_queue, self.max_concurrency,
                          self.starvation_limit_ms)
        if self.urgent_concurrency < 0:
            raise ValueError(f"urgent_concurrency must be >= 0, got {self.urgent_concurrency}")
        if not 0.05 <= self.gil_switch_interval_ms <= 100:
            raise ValueError(f"gil_switch_interval_ms must be in 0.05..100, got {self.gil_switch_interval_ms}")
        if not 0 <= self.background_nice <= 19:
            raise ValueError(f"background_nice must be in 0..19, got {self.background_nice}")
        if self.background_priority < 2:
            raise ValueError(f"background_priority must be >= 2 (realtime work is never background), "
                             f"got {self.background_priority}")
        if not 1 <= self.urgent_priority < PRIORITY_LEVELS:
            raise ValueError(f"urgent_priority must be in 1..{PRIORITY_LEVELS - 1} (1 = realtime), "
                             f"got {self.urgent_priority}")
        if self.inline_max_batch_size < 0:
            raise ValueError(f"inline_max_batch_size must be >= 0 (0 = never inline), got {self.inline_max_batch_size}")


class DynamicBatcher(Generic[T, R]):
    """Batches submitted items into calls of `run_batch(list[T]) -> list[R]` (same order, same length)."""

    def __init__(self, run_batch: Callable[[list[T]], Awaitable[Sequence[R]]], *, config: BatchingConfig,
                 on_batch: Callable[[BatchReport], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._run_batch = run_batch
        self.config = config
        self._clock = clock
        queue: LeveledQueue[T] = LeveledQueue(config.starvation_limit_ms / 1000.0,
                                              config.urgent_priority if config.urgent_concurrency else 0)
        self._loop: BatchLoop[Leveled[T], R] = BatchLoop(
            self._run_values, queue, max_batch_size=config.max_batch_size, max_delay_s=config.max_delay_ms / 1000.0,
            max_queue=config.max_queue, max_concurrency=config.max_concurrency, clock=clock, on_batch=on_batch,
            owner="the service", urgent_slots=config.urgent_concurrency)

    @property
    def queue_depth(self) -> int:
        """Items accepted and not yet dispatched."""
        return self._loop.queue_depth

    def start(self) -> None:
        """Start the dispatch loop (call from inside the event loop)."""
        self._loop.start()

    async def submit(self, values: Sequence[T], priority: int = 0) -> list[R]:
        """Queue `values` at `priority` (lower = sooner; 0 = DEFAULT_PRIORITY) and wait for all their
        results. Cancelling the caller drops its queued items."""
        level = priority or DEFAULT_PRIORITY
        now = self._clock()
        return await self._loop.submit([Leveled(value, level, now) for value in values])

    async def close(self) -> None:
        """Stop accepting work, finish every accepted item, then stop the loop."""
        await self._loop.close()

    def _run_values(self, batch: list[Leveled[T]]) -> Awaitable[Sequence[R]]:
        return self._run_batch([entry.value for entry in batch])
