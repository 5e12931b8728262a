"""Auto-batching, the pure part: which waiting items go out together, and when. No gRPC, no asyncio;
the clock is injected.

Like a Kafka producer's record accumulator: items are queued per key (the policy name, since one
`ModerateBatch` call carries one policy); a key's queue goes out as one batch as soon as it holds
`BatchLimit.current` items, or once its oldest item has waited `linger_s`. The driver
(`auditmesh.client.autobatch`) asks `due()` when the timer from `next_due()` fires, and sends what
it gets. With `idle=True` (the driver has no batch call in flight) everything waiting is due at
once: lingering only pays while calls are in flight, as in Nagle's algorithm, so a lone caller at
low load does not wait `linger_s` for company that is not coming.

`BatchLimit` is the batch size the router is currently given: it starts at `max_items`, halves when
the router refuses a whole batch with RESOURCE_EXHAUSTED (a tenant's burst or a size limit smaller
than the batch: "send smaller batches"), and grows back by one per accepted batch (AIMD).

Example::

    >>> now = [0.0]
    >>> queue = BatchAccumulator(linger_s=0.005, limit=BatchLimit(3), clock=lambda: now[0])
    >>> queue.add("default", "a"), queue.add("default", "b")
    (None, None)
    >>> queue.next_due()
    0.005
    >>> queue.add("default", "c")       # full: goes out at once
    ['a', 'b', 'c']
    >>> queue.add("strict", "d"); now[0] = 0.006
    >>> queue.due()
    [('strict', ['d'])]
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


@dataclass
class BatchLimit:
    """The current batch size cap, between 1 and `max_items` (additive increase, multiplicative decrease)."""

    max_items: int
    current: int = 0

    def __post_init__(self) -> None:
        if self.max_items < 1:
            raise ValueError(f"max_items must be >= 1, got {self.max_items}")
        self.current = self.current or self.max_items

    def refused(self, size: int) -> None:
        """A batch of `size` items was refused as a whole for its size: try half as many."""
        self.current = max(1, min(self.current, size // 2))

    def accepted(self) -> None:
        """A batch went through: allow one more item per batch, up to `max_items`."""
        self.current = min(self.max_items, self.current + 1)


@dataclass
class _Queue(Generic[T]):
    values: deque[T] = field(default_factory=deque)
    arrived: deque[float] = field(default_factory=deque)


class BatchAccumulator(Generic[T]):
    """Queues of waiting values per key; see the module docstring."""

    def __init__(self, *, linger_s: float, limit: BatchLimit, clock: Callable[[], float]) -> None:
        if linger_s < 0:
            raise ValueError(f"linger_s must be >= 0, got {linger_s}")
        self.linger_s = linger_s
        self.limit = limit
        self._clock = clock
        self._queues: dict[str, _Queue[T]] = {}

    def __len__(self) -> int:
        return sum(len(queue.values) for queue in self._queues.values())

    def add(self, key: str, value: T) -> list[T] | None:
        """Queue `value` under `key`; the batch to send now if that made the key's queue full, else None."""
        queue = self._queues.setdefault(key, _Queue())
        queue.values.append(value)
        queue.arrived.append(self._clock())
        if len(queue.values) >= self.limit.current:
            return self._take(key, queue)
        return None

    def next_due(self, *, idle: bool = False) -> float | None:
        """When (clock time) the earliest waiting batch is due, or None when nothing waits; with
        `idle`, at once (the oldest value's arrival time)."""
        oldest = min((queue.arrived[0] for queue in self._queues.values() if queue.arrived), default=None)
        return None if oldest is None else oldest + (0.0 if idle else self.linger_s)

    def due(self, *, idle: bool = False) -> list[tuple[str, list[T]]]:
        """Take every batch that is due now: keys whose oldest value waited `linger_s` (any waiting
        value when `idle`), or whose queue is full (the limit may have shrunk since values were
        added). A queue longer than the limit gives several batches."""
        now = self._clock()
        linger = 0.0 if idle else self.linger_s
        batches = []
        for key, queue in list(self._queues.items()):
            while queue.values and (queue.arrived[0] + linger <= now or len(queue.values) >= self.limit.current):
                batches.append((key, self._take(key, queue)))
        return batches

    def drain(self) -> list[tuple[str, list[T]]]:
        """Take everything that waits, in batches of at most the limit (on close: flush)."""
        batches = []
        for key, queue in list(self._queues.items()):
            while queue.values:
                batches.append((key, self._take(key, queue)))
        return batches

    def _take(self, key: str, queue: _Queue[T]) -> list[T]:
        size = min(len(queue.values), self.limit.current)
        batch = [queue.values.popleft() for _ in range(size)]
        for _ in range(size):
            queue.arrived.popleft()
        if not queue.values:
            del self._queues[key]
        return batch


__all__ = ["BatchAccumulator", "BatchLimit"]
