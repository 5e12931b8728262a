"""services/common/gc_tuning.py: the start-up heap is frozen and the thresholds set (restored after)."""

from __future__ import annotations

import gc
import weakref
from typing import Iterator

import pytest

from services.common.gc_tuning import tune_for_serving


@pytest.fixture
def restored_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("restored_gc")
def test_freezes_what_exists_and_sets_the_thresholds() -> None:
    kept = [object() for _ in range(10)], {"a": [1, 2]}
    settings = tune_for_serving(gen0=12_345, gen1=7, gen2=9)
    assert gc.get_threshold() == (12_345, 7, 9) == settings.thresholds
    assert settings.frozen_objects == gc.get_freeze_count() > 0
    assert not any(obj is kept for obj in gc.get_objects())  # frozen objects are out of the collector's view
    assert kept[1]["a"] == [1, 2]


@pytest.mark.usefixtures("restored_gc")
def test_garbage_cycles_left_by_start_up_are_collected_not_frozen() -> None:
    class Node:
        other: object = None

    gc.disable()  # the cycle must still exist when tune_for_serving runs
    try:
        first, second = Node(), Node()
        first.other, second.other = second, first
        alive = weakref.ref(first)
        del first, second
        assert alive() is not None
        tune_for_serving()
    finally:
        gc.enable()
    assert alive() is None  # collected; a frozen cycle would still be alive
    assert gc.get_freeze_count() > 0


def test_thresholds_below_one_are_refused() -> None:
    with pytest.raises(ValueError, match="thresholds must be >= 1"):
        tune_for_serving(gen0=0)
