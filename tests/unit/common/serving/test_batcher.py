"""DynamicBatcher's own parts: its config checks and the Triton priority levels a submit carries.
The loop's contract (triggers, cancellation, bounds, errors, draining, report) is in
tests/unit/common/test_batch_loop.py, the level ordering itself in test_leveled_queue.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.common.serving.batcher import DEFAULT_PRIORITY, BatchingConfig, BatchReport, DynamicBatcher
from tests.stubs import FakeClock, GatedBatchRun, settle


def held(clock: FakeClock) -> GatedBatchRun[int]:
    run: GatedBatchRun[int] = GatedBatchRun(clock, value_of=int)
    run.release.clear()
    return run


async def test_urgent_priority_levels_go_first_and_an_unset_priority_is_the_default_level() -> None:
    clock = FakeClock()
    run = held(clock)
    reports: list[BatchReport] = []
    batcher: DynamicBatcher[int, Any] = DynamicBatcher(run, config=BatchingConfig(max_batch_size=3), clock=clock,
                                                       on_batch=reports.append)
    batcher.start()
    busy = asyncio.create_task(batcher.submit([0]))  # occupies the only slot
    await settle()
    bulk = [asyncio.create_task(batcher.submit([i], priority=3)) for i in (31, 32)]
    await settle()
    clock.advance(0.001)
    unset = asyncio.create_task(batcher.submit([20]))  # no priority: DEFAULT_PRIORITY (2)
    default = asyncio.create_task(batcher.submit([21], priority=DEFAULT_PRIORITY))
    await settle()
    clock.advance(0.001)
    realtime = [asyncio.create_task(batcher.submit([i], priority=1)) for i in (11, 12)]
    await settle()
    run.release.set()
    await asyncio.gather(busy, *bulk, unset, default, *realtime)
    assert run.batches == [[0], [11, 12, 20], [21, 31, 32]]
    assert [report.top_priority for report in reports] == [DEFAULT_PRIORITY, 1, DEFAULT_PRIORITY]
    await batcher.close()


@pytest.mark.parametrize("limit_ms, batches", [
    # The bulk item has waited 200 ms, over the 100 ms limit: served before the realtime items that
    # came after it.
    pytest.param(100, [[0], [30, 11], [12, 13]], id="a_starving_level_goes_first_once_its_oldest_item_waited_the_limit"),
    # Under the 1 s limit, the same bulk item waits for the urgent ones.
    pytest.param(1000, [[0], [11, 12], [13, 30]], id="without_starvation_the_same_bulk_item_waits_for_the_urgent_ones"),
])
async def test_the_starvation_limit_decides_when_an_old_bulk_item_goes_first(limit_ms: int,
                                                                           batches: list[list[int]]) -> None:
    clock = FakeClock()
    run = held(clock)
    batcher: DynamicBatcher[int, Any] = DynamicBatcher(
        run, config=BatchingConfig(max_batch_size=2, starvation_limit_ms=limit_ms), clock=clock)
    batcher.start()
    busy = asyncio.create_task(batcher.submit([0]))
    await settle()
    old_bulk = asyncio.create_task(batcher.submit([30], priority=3))
    await settle()
    clock.advance(0.2)
    realtime = [asyncio.create_task(batcher.submit([i], priority=1)) for i in (11, 12, 13)]
    await settle()
    run.release.set()
    await asyncio.gather(busy, old_bulk, *realtime)
    assert run.batches == batches
    await batcher.close()


@pytest.mark.parametrize("kwargs, message", [
    ({"max_batch_size": 0}, "max_batch_size must be >= 1, got 0"),
    ({"max_delay_ms": -1}, "max_delay_ms must be >= 0, got -1"),
    ({"max_batch_size": 8, "max_queue": 4}, r"max_queue \(4\) must be >= max_batch_size \(8\)"),
    ({"max_concurrency": 0}, "max_concurrency must be >= 1, got 0"),
    ({"starvation_limit_ms": 0}, "starvation_limit_ms must be > 0, got 0"),
    ({"inline_max_batch_size": -1}, "inline_max_batch_size must be >= 0"),
    ({"urgent_concurrency": -1}, "urgent_concurrency must be >= 0, got -1"),
    ({"urgent_priority": 3}, r"urgent_priority must be in 1..2 \(1 = realtime\), got 3"),
])
def test_bad_settings_are_rejected_with_the_field_name(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BatchingConfig(**kwargs)


async def test_an_urgent_slot_starts_a_realtime_item_while_bulk_batches_fill_every_ordinary_slot() -> None:
    clock = FakeClock()
    run = held(clock)
    config = BatchingConfig(max_batch_size=4, max_concurrency=1, urgent_concurrency=1, urgent_priority=1)
    batcher: DynamicBatcher[int, Any] = DynamicBatcher(run, config=config, clock=clock)
    batcher.start()
    bulk = asyncio.create_task(batcher.submit([31, 32], priority=3))  # takes the ordinary slot
    await settle()
    more_bulk = asyncio.create_task(batcher.submit([33], priority=3))
    standard = asyncio.create_task(batcher.submit([21], priority=2))
    realtime = asyncio.create_task(batcher.submit([11], priority=1))
    await settle()
    assert run.batches == [[31, 32], [11]]  # realtime did not wait; standard and bulk did
    late_realtime = asyncio.create_task(batcher.submit([12], priority=1))  # both slots busy: it waits
    await settle()
    assert run.batches == [[31, 32], [11]] and batcher.queue_depth == 3
    run.release.set()
    assert await realtime == [110] and await bulk == [310, 320]
    assert await late_realtime == [120] and await standard == [210] and await more_bulk == [330]
    assert run.batches[2] == [12, 21, 33]  # the freed ordinary slot takes the rest, most urgent first
    await batcher.close()


async def test_without_urgent_concurrency_a_realtime_item_waits_for_the_running_batch() -> None:
    clock = FakeClock()
    run = held(clock)
    batcher: DynamicBatcher[int, Any] = DynamicBatcher(run, config=BatchingConfig(max_batch_size=4), clock=clock)
    batcher.start()
    bulk = asyncio.create_task(batcher.submit([31], priority=3))
    await settle()
    realtime = asyncio.create_task(batcher.submit([11], priority=1))
    await settle()
    assert run.batches == [[31]] and batcher.queue_depth == 1
    run.release.set()
    assert await bulk == [310] and await realtime == [110] and run.batches == [[31], [11]]
    await batcher.close()
