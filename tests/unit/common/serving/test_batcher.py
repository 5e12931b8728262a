"""DynamicBatcher: triggers, cancellation, bounded queue, error propagation, draining on close."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.common.errors import BatcherClosedError, BatchResultError, QueueFullError
from services.common.serving.batcher import BatchingConfig, BatchReport, DynamicBatcher


class Recorder:
    """run_batch that records batch sizes and blocks until `release` is set."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.release = asyncio.Event()
        self.release.set()

    async def __call__(self, items: list[int]) -> list[int]:
        self.batches.append(list(items))
        await self.release.wait()
        return [item * 10 for item in items]


async def test_idle_batcher_dispatches_at_once_and_batches_what_queued_meanwhile() -> None:
    recorder = Recorder()
    recorder.release.clear()
    batcher = DynamicBatcher(recorder, config=BatchingConfig(max_batch_size=8))
    batcher.start()
    first = asyncio.create_task(batcher.submit([1]))
    await asyncio.sleep(0.01)
    assert recorder.batches == [[1]]  # no window at low load
    rest = [asyncio.create_task(batcher.submit([i])) for i in range(2, 6)]
    await asyncio.sleep(0.01)
    recorder.release.set()
    assert await first == [10]
    assert [await task for task in rest] == [[20], [30], [40], [50]]
    assert recorder.batches == [[1], [2, 3, 4, 5]]
    await batcher.close()


async def test_full_batch_dispatches_before_the_window() -> None:
    recorder = Recorder()
    batcher = DynamicBatcher(recorder, config=BatchingConfig(max_batch_size=4, max_delay_ms=10_000))
    batcher.start()
    result = await asyncio.wait_for(batcher.submit([1, 2, 3, 4]), 1.0)
    assert result == [10, 20, 30, 40]
    await batcher.close()


async def test_window_waits_for_more_items_while_a_batch_runs() -> None:
    recorder = Recorder()
    recorder.release.clear()
    batcher = DynamicBatcher(recorder, config=BatchingConfig(max_batch_size=8, max_delay_ms=50, max_concurrency=2))
    batcher.start()
    busy = asyncio.create_task(batcher.submit([1]))  # idle: dispatched at once, no window
    await asyncio.sleep(0.005)
    assert recorder.batches == [[1]]
    second = asyncio.create_task(batcher.submit([2]))
    await asyncio.sleep(0.01)
    third = asyncio.create_task(batcher.submit([3]))
    await asyncio.sleep(0.01)
    assert recorder.batches == [[1]]  # a slot is free, but the window is still open
    recorder.release.set()
    await asyncio.gather(busy, second, third)
    assert recorder.batches == [[1], [2, 3]]
    await batcher.close()


async def test_cancelled_caller_leaves_the_queue_before_its_batch_runs() -> None:
    recorder = Recorder()
    recorder.release.clear()
    batcher = DynamicBatcher(recorder, config=BatchingConfig(max_batch_size=8))
    batcher.start()
    running = asyncio.create_task(batcher.submit([1]))
    await asyncio.sleep(0.01)
    doomed = asyncio.create_task(batcher.submit([2]))
    kept = asyncio.create_task(batcher.submit([3]))
    await asyncio.sleep(0.01)
    doomed.cancel()
    await asyncio.sleep(0)
    recorder.release.set()
    await running
    assert await kept == [30]
    assert recorder.batches == [[1], [3]]
    await batcher.close()


async def test_queue_is_bounded() -> None:
    recorder = Recorder()
    recorder.release.clear()
    batcher = DynamicBatcher(recorder, config=BatchingConfig(max_batch_size=2, max_queue=4))
    batcher.start()
    running = asyncio.create_task(batcher.submit([1, 2]))
    await asyncio.sleep(0.01)
    queued = asyncio.create_task(batcher.submit([3, 4, 5, 6]))
    await asyncio.sleep(0.01)
    with pytest.raises(QueueFullError, match="limit 4"):
        await batcher.submit([7])
    recorder.release.set()
    await asyncio.gather(running, queued)
    await batcher.close()


async def test_run_batch_error_reaches_every_caller_of_that_batch() -> None:
    async def broken(items: list[int]) -> list[int]:
        raise ValueError("model exploded")

    batcher = DynamicBatcher(broken, config=BatchingConfig(max_batch_size=4))
    batcher.start()
    with pytest.raises(ValueError, match="model exploded"):
        await batcher.submit([1, 2])
    await batcher.close()


async def test_wrong_result_count_is_a_typed_error() -> None:
    async def short(items: list[int]) -> list[int]:
        return items[:-1]

    batcher = DynamicBatcher(short, config=BatchingConfig(max_batch_size=4))
    batcher.start()
    with pytest.raises(BatchResultError, match="1 results for 2 items"):
        await batcher.submit([1, 2])
    await batcher.close()


async def test_close_finishes_accepted_work_and_refuses_new_work() -> None:
    recorder = Recorder()
    recorder.release.clear()
    batcher = DynamicBatcher(recorder, config=BatchingConfig(max_batch_size=1))
    batcher.start()
    accepted = [asyncio.create_task(batcher.submit([i])) for i in range(3)]
    await asyncio.sleep(0.01)
    closing = asyncio.create_task(batcher.close())
    await asyncio.sleep(0.01)
    with pytest.raises(BatcherClosedError):
        await batcher.submit([9])
    recorder.release.set()
    await closing
    assert [await task for task in accepted] == [[0], [10], [20]]


@pytest.mark.parametrize("kwargs, message", [
    ({"max_batch_size": 0}, "max_batch_size must be >= 1"),
    ({"max_delay_ms": -1}, "max_delay_ms must be >= 0"),
    ({"max_batch_size": 8, "max_queue": 4}, "max_queue"),
    ({"max_concurrency": 0}, "max_concurrency"),
])
def test_bad_settings_are_rejected_with_the_field_name(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BatchingConfig(**kwargs)


async def test_report_gives_each_items_queue_wait() -> None:
    now = [10.0]
    reports: list[BatchReport] = []
    recorder = Recorder()
    recorder.release.clear()
    batcher = DynamicBatcher(recorder, config=BatchingConfig(max_batch_size=8), on_batch=reports.append,
                             clock=lambda: now[0])
    batcher.start()
    first = asyncio.create_task(batcher.submit([1]))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    queued = asyncio.create_task(batcher.submit([2]))
    await asyncio.sleep(0)
    now[0] = 10.5
    later = asyncio.create_task(batcher.submit([3]))
    await asyncio.sleep(0)
    now[0] = 11.0
    recorder.release.set()
    await asyncio.gather(first, queued, later)
    await batcher.close()
    assert [r.size for r in reports] == [1, 2]
    assert reports[1].item_waits_s == (1.0, 0.5) and reports[1].queue_wait_s == 1.0


async def test_urgent_priority_levels_go_first_fifo_within_a_level() -> None:
    recorder = Recorder()
    recorder.release.clear()
    batcher = DynamicBatcher(recorder, config=BatchingConfig(max_batch_size=3))
    batcher.start()
    busy = asyncio.create_task(batcher.submit([0]))  # occupies the only slot
    await asyncio.sleep(0.01)
    bulk = [asyncio.create_task(batcher.submit([i], priority=3)) for i in (31, 32)]
    unset = asyncio.create_task(batcher.submit([20]))  # no priority: DEFAULT_PRIORITY (2)
    await asyncio.sleep(0.001)
    realtime = [asyncio.create_task(batcher.submit([i], priority=1)) for i in (11, 12)]
    await asyncio.sleep(0.01)
    recorder.release.set()
    await asyncio.gather(busy, *bulk, unset, *realtime)
    assert recorder.batches == [[0], [11, 12, 20], [31, 32]]
    await batcher.close()


async def test_a_starving_level_goes_first_once_its_oldest_item_waited_the_limit() -> None:
    now = [0.0]
    recorder = Recorder()
    recorder.release.clear()
    batcher = DynamicBatcher(recorder, config=BatchingConfig(max_batch_size=2, starvation_limit_ms=100),
                             clock=lambda: now[0])
    batcher.start()
    busy = asyncio.create_task(batcher.submit([0]))
    await asyncio.sleep(0.01)
    old_bulk = asyncio.create_task(batcher.submit([30], priority=3))
    await asyncio.sleep(0.001)  # queued at t=0
    now[0] = 0.2  # the bulk item has now waited 200 ms, over the 100 ms limit
    realtime = [asyncio.create_task(batcher.submit([i], priority=1)) for i in (11, 12, 13)]
    await asyncio.sleep(0.01)
    recorder.release.set()
    await asyncio.gather(busy, old_bulk, *realtime)
    assert recorder.batches[1][0] == 30, recorder.batches  # served before the realtime items that arrived after it
    await batcher.close()


def test_starvation_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="starvation_limit_ms"):
        BatchingConfig(starvation_limit_ms=0)


def test_inline_batch_size_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="inline_max_batch_size"):
        BatchingConfig(inline_max_batch_size=-1)
