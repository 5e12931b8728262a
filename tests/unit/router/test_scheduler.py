"""FairScheduler with a fake clock and an event-gated run_batch: triggers, fairness across batches,
deadline shedding (early and at batch time), cancellation, bounded queue, draining."""

from __future__ import annotations

import asyncio

import pytest

from services.common.errors import BatcherClosedError, QueueFullError
from services.common.errors import DeadlineExceededError
from services.router.fair_queue import Job
from services.router.scheduler import FairScheduler, Requester, SchedulingConfig


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class GatedModel:
    """Records batches; each batch waits for `release` and 'takes' `duration` on the fake clock."""

    def __init__(self, clock: FakeClock, duration: float = 0.01) -> None:
        self.clock, self.duration = clock, duration
        self.batches: list[list[str]] = []
        self.release = asyncio.Event()
        self.release.set()

    async def __call__(self, jobs: list[Job]) -> list[str]:
        self.batches.append([j.tenant for j in jobs])
        await self.release.wait()
        self.clock.now += self.duration
        return [f"{j.tenant}:{j.payload}" for j in jobs]


def make(clock: FakeClock, model: GatedModel, **config: object) -> FairScheduler[str]:
    scheduler: FairScheduler[str] = FairScheduler(model, config=SchedulingConfig(**config), clock=clock)  # type: ignore[arg-type]
    scheduler.start()
    return scheduler


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_idle_dispatches_at_once_then_queued_work_forms_the_next_batch() -> None:
    clock = FakeClock()
    model = GatedModel(clock)
    model.release.clear()
    scheduler = make(clock, model, max_batch_size=8, max_delay_ms=0)
    first = asyncio.create_task(scheduler.submit(Requester("a"), ["x"], deadline=clock.now + 10))
    await settle()
    assert model.batches == [["a"]]
    rest = [asyncio.create_task(scheduler.submit(Requester(t), ["y"], deadline=clock.now + 10)) for t in "bcd"]
    await settle()
    model.release.set()
    assert await first == ["a:x"]
    assert [await r for r in rest] == [["b:y"], ["c:y"], ["d:y"]]
    assert model.batches == [["a"], ["b", "c", "d"]]
    await scheduler.close()


async def test_flooding_tenant_does_not_delay_a_light_one_beyond_one_batch() -> None:
    clock = FakeClock()
    model = GatedModel(clock)
    model.release.clear()
    scheduler = make(clock, model, max_batch_size=4, max_delay_ms=0, max_concurrency=1)
    flood = asyncio.create_task(scheduler.submit(Requester("flood"), list(range(40)), deadline=clock.now + 100))
    await settle()
    light = asyncio.create_task(scheduler.submit(Requester("light"), ["hi"], deadline=clock.now + 100))
    await settle()
    model.release.set()
    await asyncio.gather(flood, light)
    index = next(i for i, batch in enumerate(model.batches) if "light" in batch)
    assert index == 1  # the batch right after the one running when it arrived
    await scheduler.close()


async def test_higher_class_goes_first() -> None:
    clock = FakeClock()
    model = GatedModel(clock)
    model.release.clear()
    scheduler = make(clock, model, max_batch_size=2, max_delay_ms=0, max_concurrency=1)
    busy = asyncio.create_task(scheduler.submit(Requester("bulk", priority=2), ["0"], deadline=clock.now + 100))
    await settle()
    bulk = asyncio.create_task(scheduler.submit(Requester("bulk", priority=2), ["1", "2", "3"], deadline=clock.now + 100))
    chat = asyncio.create_task(scheduler.submit(Requester("chat", priority=0), ["m"], deadline=clock.now + 100))
    await settle()
    model.release.set()
    await asyncio.gather(busy, bulk, chat)
    assert model.batches[1][0] == "chat"
    await scheduler.close()


async def test_early_shedding_uses_the_learned_batch_cost() -> None:
    clock = FakeClock()
    model = GatedModel(clock, duration=0.1)
    scheduler = make(clock, model, max_batch_size=4, max_delay_ms=0, max_concurrency=1)
    for size in (1, 2, 4, 1, 3):  # teach the cost model: ~0.1 s per batch
        await scheduler.submit(Requester("a"), list(range(size)), deadline=clock.now + 10)
    model.release.clear()
    busy = asyncio.create_task(scheduler.submit(Requester("a"), ["busy"], deadline=clock.now + 10))
    await settle()  # the only batch slot is taken: a new item waits ~0.1 s, then takes ~0.1 s
    with pytest.raises(DeadlineExceededError, match="shed early"):
        await scheduler.submit(Requester("a"), ["late"], deadline=clock.now + 0.15)
    assert scheduler.shed_count == 1
    model.release.set()
    await busy
    assert len(model.batches) == 6  # the shed item never reached the model
    await scheduler.close()


async def test_never_sheds_early_when_the_upstream_has_room() -> None:
    # A cost estimate of 0.1 s and 0.05 s left: with nothing queued and a batch slot free the item
    # is sent anyway (the estimate may be cold or stale; the upstream is idle).
    clock = FakeClock()
    model = GatedModel(clock, duration=0.1)
    scheduler = make(clock, model, max_batch_size=4, max_delay_ms=0, max_concurrency=2)
    for size in (1, 2, 4, 1, 3):
        await scheduler.submit(Requester("a"), list(range(size)), deadline=clock.now + 10)
    model.release.clear()
    busy = asyncio.create_task(scheduler.submit(Requester("a"), ["busy"], deadline=clock.now + 10))
    await settle()  # one batch running, the second slot free
    assert scheduler.expected_wait_s(Requester("b")) == pytest.approx(0.1, rel=0.2)  # its own batch only
    model.release.set()
    assert await scheduler.submit(Requester("b"), ["x"], deadline=clock.now + 10) == ["b:x"]
    await busy
    assert scheduler.shed_count == 0
    await scheduler.close()


async def test_item_that_can_no_longer_finish_is_shed_at_batch_time() -> None:
    clock = FakeClock()
    model = GatedModel(clock, duration=0.1)
    scheduler = make(clock, model, max_batch_size=4, max_delay_ms=0, max_concurrency=1, shed_early=False)
    for size in (1, 2, 4, 1):
        await scheduler.submit(Requester("a"), list(range(size)), deadline=clock.now + 10)
    model.release.clear()
    busy = asyncio.create_task(scheduler.submit(Requester("a"), ["busy"], deadline=clock.now + 10))
    await settle()
    doomed = asyncio.create_task(scheduler.submit(Requester("b"), ["doomed"], deadline=clock.now + 0.15))
    await settle()
    model.release.set()  # the running batch ends at +0.1; the next one would end at +0.2 > deadline
    await busy
    with pytest.raises(DeadlineExceededError, match="could no longer finish"):
        await doomed
    assert all("b" not in batch for batch in model.batches)
    await scheduler.close()


async def test_cancelled_caller_leaves_the_queue() -> None:
    clock = FakeClock()
    model = GatedModel(clock)
    model.release.clear()
    scheduler = make(clock, model, max_batch_size=8, max_delay_ms=0, max_concurrency=1)
    busy = asyncio.create_task(scheduler.submit(Requester("a"), ["1"], deadline=clock.now + 10))
    await settle()
    gone = asyncio.create_task(scheduler.submit(Requester("b"), ["2", "3"], deadline=clock.now + 10))
    await settle()
    assert scheduler.queue_depth == 2
    gone.cancel()
    await settle()
    assert scheduler.queue_depth == 0
    model.release.set()
    await busy
    await scheduler.close()
    assert model.batches == [["a"]]


async def test_queue_bound_and_close() -> None:
    clock = FakeClock()
    model = GatedModel(clock)
    model.release.clear()
    scheduler = make(clock, model, max_batch_size=2, max_queue=4, max_delay_ms=0, max_concurrency=1)
    running = asyncio.create_task(scheduler.submit(Requester("a"), ["1"], deadline=clock.now + 10))
    await settle()
    queued = asyncio.create_task(scheduler.submit(Requester("a"), ["2", "3", "4", "5"], deadline=clock.now + 10))
    await settle()
    with pytest.raises(QueueFullError, match="limit 4"):
        await scheduler.submit(Requester("b"), ["6"], deadline=clock.now + 10)
    closing = asyncio.create_task(scheduler.close())
    await settle()
    with pytest.raises(BatcherClosedError):
        await scheduler.submit(Requester("b"), ["7"], deadline=clock.now + 10)
    model.release.set()
    await closing
    assert await running == ["a:1"] and len(await queued) == 4  # accepted work finished


async def test_overload_signal_follows_the_expected_wait() -> None:
    clock = FakeClock()
    model = GatedModel(clock, duration=0.1)
    scheduler = make(clock, model, max_batch_size=2, max_delay_ms=0, overload_wait_ms=250)
    await scheduler.submit(Requester("a"), ["1", "2"], deadline=clock.now + 10)
    assert not scheduler.overloaded(Requester("bulk", priority=2))
    model.release.clear()
    flood = asyncio.create_task(scheduler.submit(Requester("bulk", priority=2), list(range(8)), deadline=clock.now + 100))
    await settle()
    assert scheduler.overloaded(Requester("bulk", priority=2))
    model.release.set()
    await flood
    await scheduler.close()
