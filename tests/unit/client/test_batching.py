"""auditmesh.client.batching: which waiting items go out together, on a fake clock."""

from __future__ import annotations

import pytest

from auditmesh.client.batching import BatchAccumulator, BatchLimit
from tests.stubs import FakeClock


def accumulator(clock: FakeClock, *, linger_s: float = 0.005, max_items: int = 4) -> BatchAccumulator[str]:
    return BatchAccumulator(linger_s=linger_s, limit=BatchLimit(max_items), clock=clock)


def test_a_full_queue_goes_out_at_once_and_the_rest_waits_for_linger() -> None:
    clock = FakeClock()
    queue = accumulator(clock, max_items=2)
    assert queue.add("p", "a") is None
    assert queue.add("p", "b") == ["a", "b"]
    assert queue.add("p", "c") is None
    assert queue.due() == []
    clock.advance(0.004)
    assert queue.due() == []
    clock.advance(0.001)
    assert queue.due() == [("p", ["c"])]
    assert len(queue) == 0 and queue.next_due() is None


def test_linger_counts_from_the_oldest_item_of_each_key() -> None:
    clock = FakeClock()
    queue = accumulator(clock)
    queue.add("default", "a")
    clock.advance(0.003)
    queue.add("default", "b")
    queue.add("strict", "c")
    assert queue.next_due() == pytest.approx(clock.now + 0.002)
    clock.advance(0.002)
    assert queue.due() == [("default", ["a", "b"])]   # "strict" waited only 2 ms
    assert queue.next_due() == pytest.approx(clock.now + 0.003)
    clock.advance(0.003)
    assert queue.due() == [("strict", ["c"])]


def test_items_of_different_policies_never_share_a_batch() -> None:
    clock = FakeClock()
    queue = accumulator(clock, max_items=2)
    assert queue.add("default", "a") is None
    assert queue.add("strict", "b") is None
    assert queue.add("default", "c") == ["a", "c"]


def test_a_shrunk_limit_splits_what_waits_into_several_batches() -> None:
    clock = FakeClock()
    queue = accumulator(clock, max_items=8)
    for name in "abcde":
        queue.add("p", name)
    queue.limit.refused(5)   # -> 2
    assert queue.due() == [("p", ["a", "b"]), ("p", ["c", "d"])]
    assert queue.drain() == [("p", ["e"])]


def test_drain_takes_everything_in_batches_of_the_limit() -> None:
    clock = FakeClock()
    queue = accumulator(clock, max_items=3, linger_s=10.0)
    for i in range(4):
        queue.add("p", str(i))   # the 3rd add returns a full batch
    queue.add("q", "x")
    assert queue.drain() == [("p", ["3"]), ("q", ["x"])]


def test_zero_linger_sends_whatever_waits_at_the_next_check() -> None:
    clock = FakeClock()
    queue = accumulator(clock, linger_s=0.0)
    queue.add("p", "a")
    queue.add("p", "b")
    assert queue.next_due() == clock.now
    assert queue.due() == [("p", ["a", "b"])]


def test_batch_limit_halves_on_refusal_and_grows_back_by_one() -> None:
    limit = BatchLimit(64)
    limit.refused(64)
    assert limit.current == 32
    limit.refused(5)
    assert limit.current == 2
    limit.refused(1)
    assert limit.current == 1
    for _ in range(3):
        limit.accepted()
    assert limit.current == 4
    for _ in range(100):
        limit.accepted()
    assert limit.current == 64


@pytest.mark.parametrize("bad", [0, -1])
def test_bad_settings_are_refused_naming_the_field(bad: int) -> None:
    with pytest.raises(ValueError, match="max_items"):
        BatchLimit(bad)
    with pytest.raises(ValueError, match="linger_s"):
        BatchAccumulator(linger_s=-0.001, limit=BatchLimit(1), clock=FakeClock())


def test_when_idle_everything_waiting_is_due_at_once() -> None:
    clock = FakeClock()
    queue = accumulator(clock, linger_s=10.0)
    queue.add("p", "a")
    queue.add("q", "b")
    assert queue.next_due(idle=True) == clock.now
    assert queue.due() == []
    assert queue.due(idle=True) == [("p", ["a"]), ("q", ["b"])]
