"""FairScheduler's own parts, with a fake clock and an Event-gated run_batch: fairness across batches,
classes, deadline shedding (early and at batch time, counted), the cost fit, the overload signal and
its config checks. The loop's contract (triggers, cancellation, bounds, errors, draining, report,
request context) is in tests/unit/common/test_batch_loop.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.common.batch_loop import BatchReport
from services.common.errors import DeadlineExceededError
from services.router.fair_queue import Job
from services.router.scheduler import FairScheduler, Requester, SchedulingConfig
from tests.stubs import FakeClock, GatedBatchRun, settle


def tenant_of(job: Job) -> str:
    return job.tenant


def gated(clock: FakeClock, duration: float = 0.01) -> GatedBatchRun[str]:
    """Records the tenant of each job in each batch."""
    return GatedBatchRun(clock, value_of=tenant_of, duration=duration)


def make(clock: FakeClock, model: GatedBatchRun[str], **config: Any) -> FairScheduler[object]:
    scheduler: FairScheduler[object] = FairScheduler(model, config=SchedulingConfig(**config), clock=clock)
    scheduler.start()
    return scheduler


async def teach(scheduler: FairScheduler[object], clock: FakeClock, sizes: tuple[int, ...] = (1, 2, 4, 1)) -> None:
    """Run a few batches so the cost fit learns how long one takes (the model's `duration`)."""
    for size in sizes:
        await scheduler.submit(Requester("a"), list(range(size)), deadline=clock.now + 10)


async def test_flooding_tenant_does_not_delay_a_light_one_beyond_one_batch() -> None:
    clock = FakeClock()
    model = gated(clock)
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
    model = gated(clock)
    model.release.clear()
    scheduler = make(clock, model, max_batch_size=2, max_delay_ms=0, max_concurrency=1)
    busy = asyncio.create_task(scheduler.submit(Requester("bulk", priority=2), ["0"], deadline=clock.now + 100))
    await settle()
    bulk = asyncio.create_task(scheduler.submit(Requester("bulk", priority=2), ["1", "2", "3"], deadline=clock.now + 100))
    chat = asyncio.create_task(scheduler.submit(Requester("chat", priority=0), ["m"], deadline=clock.now + 100))
    await settle()
    model.release.set()
    await asyncio.gather(busy, bulk, chat)
    assert model.batches == [["bulk"], ["chat", "bulk"], ["bulk", "bulk"]]
    await scheduler.close()


async def test_early_shedding_uses_the_learned_batch_cost() -> None:
    clock = FakeClock()
    model = gated(clock, duration=0.1)
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
    model = gated(clock, duration=0.1)
    scheduler = make(clock, model, max_batch_size=4, max_delay_ms=0, max_concurrency=2)
    for size in (1, 2, 4, 1, 3):
        await scheduler.submit(Requester("a"), list(range(size)), deadline=clock.now + 10)
    model.release.clear()
    busy = asyncio.create_task(scheduler.submit(Requester("a"), ["busy"], deadline=clock.now + 10))
    await settle()  # one batch running, the second slot free
    assert scheduler.expected_wait_s(Requester("b")) == pytest.approx(0.1, rel=0.2)  # its own batch only
    model.release.set()
    assert await scheduler.submit(Requester("b"), ["x"], deadline=clock.now + 10) == ["b"]
    await busy
    assert scheduler.shed_count == 0
    await scheduler.close()


async def test_without_a_cost_fit_nothing_is_shed_early() -> None:
    clock = FakeClock()
    model = gated(clock, duration=0.1)
    scheduler = make(clock, model, max_batch_size=4, max_delay_ms=0)
    assert scheduler.expected_wait_s(Requester("a")) == 0.0  # nothing has run yet
    assert await scheduler.submit(Requester("a"), ["tight"], deadline=clock.now + 0.05) == ["a"]
    assert scheduler.shed_count == 0
    await scheduler.close()


async def test_item_that_can_no_longer_finish_is_shed_at_batch_time() -> None:
    clock = FakeClock()
    model = gated(clock, duration=0.1)
    scheduler = make(clock, model, max_batch_size=4, max_delay_ms=0, max_concurrency=1, shed_early=False)
    await teach(scheduler, clock)
    model.release.clear()
    busy = asyncio.create_task(scheduler.submit(Requester("a"), ["busy"], deadline=clock.now + 10))
    await settle()
    doomed = asyncio.create_task(scheduler.submit(Requester("b"), ["doomed"], deadline=clock.now + 0.15))
    await settle()
    model.release.set()  # the running batch ends at +0.1; the next one would end at +0.2 > deadline
    await busy
    with pytest.raises(DeadlineExceededError, match="could no longer finish"):
        await asyncio.wait_for(doomed, 1.0)  # real time only to fail fast, not hang
    assert all("b" not in batch for batch in model.batches)
    assert scheduler.shed_count == 1 and scheduler.queue_depth == 0
    await scheduler.close()


async def test_a_prior_alone_never_sheds_at_batch_time() -> None:
    """A warm-run prior timed on a busy host (2.9 s) longer than the deadline: the item is still sent
    (only a batch that runs can correct the prior); once batches confirm the cost, it sheds."""
    clock = FakeClock()
    model = gated(clock, duration=0.3)
    scheduler = make(clock, model, max_batch_size=4, max_delay_ms=0, max_concurrency=1, shed_early=False)
    scheduler.cost.seed(1, 2.9)
    assert await scheduler.submit(Requester("a"), ["first"], deadline=clock.now + 2.0) == ["a"]
    assert scheduler.shed_count == 0 and scheduler.cost.observed
    slow = gated(clock, duration=3.0)
    scheduler_slow = make(clock, slow, max_batch_size=4, max_delay_ms=0, max_concurrency=1, shed_early=False)
    scheduler_slow.cost.seed(1, 2.9)
    await scheduler_slow.submit(Requester("a"), ["taught"], deadline=clock.now + 10.0)  # observed: 3 s
    with pytest.raises(DeadlineExceededError, match="could no longer finish"):
        await asyncio.wait_for(scheduler_slow.submit(Requester("b"), ["late"], deadline=clock.now + 2.0), 1.0)
    assert scheduler_slow.shed_count == 1 and all("b" not in batch for batch in slow.batches)
    await scheduler.close()
    await scheduler_slow.close()


async def test_a_failed_batch_does_not_teach_the_cost_fit_but_is_reported() -> None:
    clock = FakeClock()
    reports: list[BatchReport] = []

    async def slow_failure(jobs: list[Job]) -> list[object]:
        clock.advance(5.0)
        raise RuntimeError("upstream down")

    scheduler: FairScheduler[object] = FairScheduler(slow_failure, config=SchedulingConfig(max_delay_ms=0),
                                                     clock=clock, on_batch=reports.append)
    scheduler.start()
    for _ in range(5):
        with pytest.raises(RuntimeError, match="upstream down"):
            await scheduler.submit(Requester("a", priority=2), ["x"], deadline=clock.now + 10)
    assert scheduler.cost.estimate() is None  # 5 s failures would otherwise shed everything early
    assert [(r.size, r.top_priority, type(r.error)) for r in reports] == [(1, 2, RuntimeError)] * 5
    await scheduler.close()


async def test_overload_signal_follows_the_expected_wait() -> None:
    clock = FakeClock()
    model = gated(clock, duration=0.1)
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


@pytest.mark.parametrize("kwargs, message", [
    ({"max_batch_size": 0}, "max_batch_size must be >= 1, got 0"),
    ({"max_batch_size": 8, "max_queue": 4}, r"max_queue \(4\) must be >= max_batch_size \(8\)"),
    ({"starvation_limit_ms": 0}, "starvation_limit_ms must be > 0, got 0"),
    ({"overload_wait_ms": -1}, "overload_wait_ms must be >= 0"),
])
def test_bad_settings_are_rejected_with_the_field_name(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SchedulingConfig(**kwargs)
