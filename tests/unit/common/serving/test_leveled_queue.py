"""LeveledQueue with explicit times: urgent levels first, FIFO within a level, the starvation guard,
O(1) removal (removed entries are skipped), the oldest entry, the size."""

from __future__ import annotations

import pytest

from services.common.serving.leveled_queue import Leveled, LeveledQueue


def queued(queue: LeveledQueue[str], *entries: tuple[str, int, float]) -> list[Leveled[str]]:
    made = [Leveled(value, priority=level, enqueued=at) for value, level, at in entries]
    for entry in made:
        queue.push(entry)
    return made


def values(batch: list[Leveled[str]]) -> list[str]:
    return [entry.value for entry in batch]


def test_urgent_levels_go_first_and_fifo_within_a_level() -> None:
    queue: LeveledQueue[str] = LeveledQueue(starvation_limit_s=10)
    queued(queue, ("bulk-1", 3, 0.0), ("bulk-2", 3, 0.0), ("std", 2, 0.1), ("rt-1", 1, 0.2), ("rt-2", 1, 0.3))
    batch, shed = queue.pop_batch(1.0, 3)
    assert values(batch) == ["rt-1", "rt-2", "std"] and list(shed) == []
    assert values(queue.pop_batch(1.0, 8)[0]) == ["bulk-1", "bulk-2"]
    assert len(queue) == 0 and queue.oldest_enqueued() is None


def test_a_level_whose_oldest_entry_waited_the_limit_goes_first() -> None:
    queue: LeveledQueue[str] = LeveledQueue(starvation_limit_s=0.1)
    queued(queue, ("old-bulk", 3, 0.0), ("rt-1", 1, 0.15), ("rt-2", 1, 0.16))
    assert values(queue.pop_batch(0.05, 1)[0]) == ["rt-1"]  # not starving yet at 50 ms
    assert values(queue.pop_batch(0.2, 2)[0]) == ["old-bulk", "rt-2"]  # 200 ms > 100 ms: served first


def test_removed_entries_leave_at_once_and_are_skipped() -> None:
    queue: LeveledQueue[str] = LeveledQueue(starvation_limit_s=10)
    head, middle, tail = queued(queue, ("a", 2, 0.0), ("b", 2, 0.1), ("c", 2, 0.2))
    assert queue.remove(middle) and queue.remove(head)
    assert not queue.remove(head)  # already out
    assert len(queue) == 1 and queue.oldest_enqueued() == 0.2  # the removed head no longer counts
    assert values(queue.pop_batch(1.0, 8)[0]) == ["c"]
    assert not queue.remove(tail)  # popped: no longer queued
    assert len(queue) == 0


def test_removing_a_levels_only_entry_forgets_the_level() -> None:
    queue: LeveledQueue[str] = LeveledQueue(starvation_limit_s=0.1)
    (bulk,) = queued(queue, ("bulk", 3, 0.0))
    queued(queue, ("rt", 1, 0.5))
    queue.remove(bulk)
    assert queue.oldest_enqueued() == 0.5
    assert values(queue.pop_batch(5.0, 8)[0]) == ["rt"]  # the removed entry cannot win on starvation


def test_unknown_levels_are_ordered_after_the_known_ones() -> None:
    queue: LeveledQueue[str] = LeveledQueue(starvation_limit_s=10)
    queued(queue, ("level-7", 7, 0.0), ("level-3", 3, 0.1))
    assert values(queue.pop_batch(1.0, 8)[0]) == ["level-3", "level-7"]


def test_starvation_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="starvation_limit_s must be > 0, got 0"):
        LeveledQueue(starvation_limit_s=0)


def test_urgent_entries_can_be_taken_alone_and_are_counted_through_push_remove_and_pop() -> None:
    queue: LeveledQueue[str] = LeveledQueue(starvation_limit_s=0.1, urgent_level=1)
    bulk, rt_1, _, _ = queued(queue, ("bulk", 3, 0.0), ("rt-1", 1, 0.1), ("std", 2, 0.2), ("rt-2", 1, 0.3))
    assert queue.urgent_depth() == 2
    queue.remove(rt_1)
    assert queue.urgent_depth() == 1
    # the bulk entry is starving at 5 s, but an urgent batch takes urgent entries only
    assert values(queue.pop_urgent(5.0, 8)[0]) == ["rt-2"] and queue.urgent_depth() == 0
    assert values(queue.pop_urgent(5.0, 8)[0]) == []
    assert values(queue.pop_batch(5.0, 8)[0]) == ["bulk", "std"] and len(queue) == 0
    assert not queue.remove(bulk) and queue.urgent_depth() == 0


def test_without_an_urgent_level_nothing_is_urgent() -> None:
    queue: LeveledQueue[str] = LeveledQueue(starvation_limit_s=10)
    queued(queue, ("rt", 1, 0.0))
    assert queue.urgent_depth() == 0 and values(queue.pop_urgent(1.0, 8)[0]) == []
    with pytest.raises(ValueError, match="urgent_level must be >= 0"):
        LeveledQueue(starvation_limit_s=10, urgent_level=-1)
