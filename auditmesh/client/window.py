"""The chat helper's bookkeeping, pure (no gRPC, no asyncio; times are passed in): which messages of a
`ModerateStream` are outstanding, which answers may be handed to the caller, which are overdue.

A message enters the window when sent and leaves it when the caller takes its answer, so the
window bounds memory whatever the caller does: a slow consumer stops the sender (`has_room` is
False) instead of letting answers pile up. With `ordered=True` answers are handed out in send order
(an early answer waits for the ones before it); otherwise in the order they arrive. A message
unanswered at its deadline is reported by `overdue` so the driver can answer it locally
(DEADLINE_EXCEEDED) and a late answer from the router is then dropped (`answer` returns False).

Example::

    >>> window = ChatWindow[str](capacity=2, ordered=True)
    >>> window.open("m1", deadline=1.0); window.open("m2", deadline=1.0)
    >>> window.has_room
    False
    >>> window.answer("m2", "ok-2"), window.take()
    (True, [])
    >>> window.answer("m1", "ok-1"), window.take()
    (True, [('m1', 'ok-1'), ('m2', 'ok-2')])
    >>> window.has_room
    True
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Generic, TypeVar

R = TypeVar("R")


@dataclass
class _Entry(Generic[R]):
    deadline: float
    boxed: tuple[R] | None = None  # (result,) once answered: R itself may be None

    @property
    def answered(self) -> bool:
        return self.boxed is not None


class ChatWindow(Generic[R]):
    """Outstanding stream messages by request id, in send order (see the module docstring)."""

    def __init__(self, *, capacity: int, ordered: bool) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.ordered = ordered
        self._entries: OrderedDict[str, _Entry[R]] = OrderedDict()
        self._arrivals: deque[str] = deque()  # unordered delivery: answered ids in answer order

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def has_room(self) -> bool:
        """Whether another message may be sent (fewer than `capacity` are sent and not yet taken)."""
        return len(self._entries) < self.capacity

    @property
    def unanswered(self) -> int:
        return sum(not entry.answered for entry in self._entries.values())

    def open(self, request_id: str, *, deadline: float) -> None:
        """Record a message about to be sent. Raises ValueError for a duplicate id (the answers are
        matched by id) and OverflowError when the window is full (wait for `has_room`)."""
        if request_id in self._entries:
            raise ValueError(f"request_id {request_id!r} is already outstanding; ids must be unique")
        if not self.has_room:
            raise OverflowError(f"the window of {self.capacity} messages is full")
        self._entries[request_id] = _Entry(deadline)

    def answer(self, request_id: str, result: R) -> bool:
        """Record the answer to `request_id`; False (ignored) when it is unknown or already answered
        (a late answer after a local deadline error)."""
        entry = self._entries.get(request_id)
        if entry is None or entry.answered:
            return False
        entry.boxed = (result,)
        if not self.ordered:
            self._arrivals.append(request_id)
        return True

    def overdue(self, now: float) -> list[str]:
        """Unanswered messages whose deadline has passed, in send order."""
        return [rid for rid, entry in self._entries.items() if not entry.answered and entry.deadline <= now]

    def next_deadline(self) -> float | None:
        """The earliest deadline of an unanswered message (None when all are answered)."""
        return min((entry.deadline for entry in self._entries.values() if not entry.answered), default=None)

    def unanswered_ids(self) -> list[str]:
        return [rid for rid, entry in self._entries.items() if not entry.answered]

    def take(self, max_items: int | None = None) -> list[tuple[str, R]]:
        """Hand out the answers that may be delivered now (at most `max_items`), removing them from
        the window: only then does the window have room again."""
        ready: list[tuple[str, R]] = []
        limit = len(self._entries) if max_items is None else max_items
        if self.ordered:
            while self._entries and len(ready) < limit:
                rid, entry = next(iter(self._entries.items()))
                if not entry.answered:
                    break
                del self._entries[rid]
                ready.append((rid, _unbox(entry)))
        else:
            while self._arrivals and len(ready) < limit:
                rid = self._arrivals.popleft()
                entry = self._entries.pop(rid)
                ready.append((rid, _unbox(entry)))
        return ready


def _unbox(entry: _Entry[R]) -> R:
    if entry.boxed is None:
        raise RuntimeError("an unanswered message was handed out")  # a bug in ChatWindow itself
    return entry.boxed[0]


__all__ = ["ChatWindow"]
