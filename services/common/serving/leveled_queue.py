"""The modality services' queue policy: Triton's dynamic-batcher priority levels. Pure: no asyncio.

A level is an int, lower = more urgent (the router sends realtime 1, standard 2, bulk 3). A batch takes
the most urgent entries first, oldest first within a level; an entry that has waited
`starvation_limit_s` goes first whatever its level (the level with the oldest head is served), so a
busy urgent level cannot starve the others. Removal is O(1): a removed entry is skipped when it
reaches the head of its level. Entries at `urgent_level` or more urgent can also be taken alone
(`pop_urgent`: `services.common.batch_loop.UrgentQueuePolicy`), for a batch slot kept for them.

Example::

    queue = LeveledQueue(starvation_limit_s=0.2)
    queue.push(Leveled("bulk text", priority=3, enqueued=now))
    queue.push(Leveled("chat text", priority=1, enqueued=now))
    batch, shed = queue.pop_batch(now, max_items=8)   # ["chat text", "bulk text"] entries, shed == ()
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")

_NOTHING_SHED: tuple[()] = ()


@dataclass(eq=False)
class Leveled(Generic[T]):
    """One queued value and its level (`priority`, lower = sooner). Identity-compared."""

    value: T
    priority: int
    enqueued: float
    queued: bool = field(default=False, repr=False)


class LeveledQueue(Generic[T]):
    """FIFO queues per level. See the module docstring. Not thread-safe; one event loop owns it."""

    def __init__(self, starvation_limit_s: float, urgent_level: int = 0) -> None:
        """`urgent_level`: entries at this level or below are urgent (0: none is, levels start at 1)."""
        if starvation_limit_s <= 0:
            raise ValueError(f"starvation_limit_s must be > 0, got {starvation_limit_s}")
        if urgent_level < 0:
            raise ValueError(f"urgent_level must be >= 0, got {urgent_level}")
        # Every level kept here is non-empty and its head is still queued (removed entries further
        # back are skipped when they reach the head).
        self._levels: dict[int, deque[Leveled[T]]] = {}
        self._size = 0
        self._urgent_size = 0
        self._urgent_level = urgent_level
        self._starvation_limit_s = starvation_limit_s

    def __len__(self) -> int:
        return self._size

    def push(self, entry: Leveled[T]) -> None:
        """Queue `entry` at the back of its level."""
        queue = self._levels.get(entry.priority)
        if queue is None:
            queue = self._levels[entry.priority] = deque()
        queue.append(entry)
        entry.queued = True
        self._size += 1
        if entry.priority <= self._urgent_level:
            self._urgent_size += 1

    def urgent_depth(self) -> int:
        """Queued entries at `urgent_level` or below."""
        return self._urgent_size

    def remove(self, entry: Leveled[T]) -> bool:
        """Take `entry` out (its caller gave up). True if it was still queued."""
        if not entry.queued:
            return False
        entry.queued = False
        self._size -= 1
        if entry.priority <= self._urgent_level:
            self._urgent_size -= 1
        self._trim(entry.priority)
        return True

    def oldest_enqueued(self) -> float | None:
        """When the oldest queued entry was queued (None when empty)."""
        return min((queue[0].enqueued for queue in self._levels.values()), default=None)

    def pop_batch(self, now: float, max_items: int) -> tuple[list[Leveled[T]], tuple[()]]:
        """Up to `max_items` entries in service order; nothing is ever shed here."""
        batch: list[Leveled[T]] = []
        while self._size and len(batch) < max_items:
            batch.append(self._pop(now))
        return batch, _NOTHING_SHED

    def pop_urgent(self, now: float, max_items: int) -> tuple[list[Leveled[T]], tuple[()]]:
        """Up to `max_items` urgent entries, most urgent level first, oldest first within it."""
        batch: list[Leveled[T]] = []
        while self._urgent_size and len(batch) < max_items:
            batch.append(self._take(min(self._levels)))
        return batch, _NOTHING_SHED

    def _pop(self, now: float) -> Leveled[T]:
        levels = sorted(self._levels)
        chosen = levels[0]
        if len(levels) > 1:
            starving = min(levels, key=lambda level: self._levels[level][0].enqueued)
            if now - self._levels[starving][0].enqueued >= self._starvation_limit_s:
                chosen = starving
        return self._take(chosen)

    def _take(self, chosen: int) -> Leveled[T]:
        queue = self._levels[chosen]
        entry = queue.popleft()
        entry.queued = False
        self._size -= 1
        if entry.priority <= self._urgent_level:
            self._urgent_size -= 1
        if not queue or not queue[0].queued:  # keep the invariant: a live head, or no level
            self._trim(chosen)
        return entry

    def _trim(self, level: int) -> None:
        """Drop removed entries from the head of `level`, and the level once it is empty."""
        queue = self._levels.get(level)
        if queue is None:
            return
        while queue and not queue[0].queued:
            queue.popleft()
        if not queue:
            del self._levels[level]
