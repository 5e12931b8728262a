"""The batch loop's contract, once per tier: the modality services' DynamicBatcher (leveled queue) and
the router's FairScheduler (fair queue). Fake clock and an Event-gated run_batch; no time passes.

Triggers (idle, full, window), one future per item, cancellation, the bounded queue, errors (run_batch's
and a wrong result count), draining on close, the report, concurrency slots and request context; and,
on the loop itself, that a cancelled entry a policy still holds never runs.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Coroutine, Sequence

import pytest

from services.common.batch_loop import BatchLoop, BatchReport
from services.common.errors import BatcherClosedError, BatchResultError, QueueFullError
from services.common.serving.batcher import BatchingConfig, DynamicBatcher
from services.router.fair_queue import Job
from services.router.scheduler import FairScheduler, Requester, SchedulingConfig
from tests.stubs import FakeClock, GatedBatchRun, settle

CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="none")
RunBatch = Callable[[list[Any]], Awaitable[Sequence[Any]]]
Reports = Callable[[BatchReport], None] | None


def _leveled(run_batch: RunBatch, clock: FakeClock, on_batch: Reports, settings: dict[str, Any]) -> Any:
    return DynamicBatcher(run_batch, config=BatchingConfig(**settings), clock=clock, on_batch=on_batch)


def _fair(run_batch: RunBatch, clock: FakeClock, on_batch: Reports, settings: dict[str, Any]) -> Any:
    return FairScheduler(run_batch, config=SchedulingConfig(**settings), clock=clock, on_batch=on_batch)


async def _submit_leveled(front: Any, values: list[int], urgent: bool) -> list[Any]:
    result: list[Any] = await front.submit(values, priority=1 if urgent else 0)
    return result


async def _submit_fair(front: Any, values: list[int], urgent: bool) -> list[Any]:
    requester = Requester("urgent", priority=0) if urgent else Requester("standard", priority=1)
    result: list[Any] = await front.submit(requester, values, math.inf)  # never cut by a deadline here
    return result


@dataclass(frozen=True)
class Tier:
    """How to build, feed and read one front end of the loop."""

    name: str
    urgent: int  # the priority an urgent submit has, as the report gives it
    build: Callable[[RunBatch, FakeClock, Reports, dict[str, Any]], Any]
    submit_values: Callable[[Any, list[int], bool], Coroutine[Any, Any, list[Any]]]
    value_of: Callable[[Any], Any]  # what run_batch is handed -> the submitted value

    def make(self, clock: FakeClock, run_batch: RunBatch, *, on_batch: Reports = None, **settings: Any) -> Any:
        """A started front end; no window and one batch at a time unless the test says otherwise."""
        front = self.build(run_batch, clock, on_batch, {"max_delay_ms": 0.0, "max_concurrency": 1, **settings})
        front.start()
        return front

    def submit(self, front: Any, values: list[int], *, urgent: bool = False) -> asyncio.Task[list[Any]]:
        return asyncio.create_task(self.submit_values(front, values, urgent))


def _job_payload(job: Job) -> Any:
    return job.payload


def _itself(value: Any) -> Any:
    return value


TIERS = [Tier("leveled", 1, _leveled, _submit_leveled, _itself), Tier("fair", 0, _fair, _submit_fair, _job_payload)]


@pytest.fixture(params=TIERS, ids=[tier.name for tier in TIERS])
def tier(request: pytest.FixtureRequest) -> Tier:
    chosen: Tier = request.param
    return chosen


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(100.0)


def gated(tier: Tier, clock: FakeClock, *, duration: float = 0.01) -> GatedBatchRun[Any]:
    """A run_batch whose batches wait for `release` (not set yet)."""
    run: GatedBatchRun[Any] = GatedBatchRun(clock, value_of=tier.value_of, duration=duration)
    run.release.clear()
    return run


async def test_an_idle_loop_dispatches_at_once_whatever_the_window(tier: Tier, clock: FakeClock) -> None:
    run = gated(tier, clock)
    run.release.set()
    front = tier.make(clock, run, max_batch_size=8, max_delay_ms=10_000)
    # The guard is real time only to fail fast: an idle loop that waited would take 10 s.
    assert await asyncio.wait_for(tier.submit(front, [1]), 1.0) == [10]
    assert await asyncio.wait_for(tier.submit(front, [2, 3]), 1.0) == [20, 30]
    assert run.batches == [[1], [2, 3]]
    await front.close()


async def test_work_queued_while_a_batch_runs_forms_the_next_batch(tier: Tier, clock: FakeClock) -> None:
    run = gated(tier, clock)
    front = tier.make(clock, run, max_batch_size=8)
    first = tier.submit(front, [1])
    await settle()
    assert run.batches == [[1]]
    rest = [tier.submit(front, [i]) for i in (2, 3, 4)]
    await settle()
    assert run.batches == [[1]] and front.queue_depth == 3
    run.release.set()
    assert await first == [10]
    assert [await task for task in rest] == [[20], [30], [40]]
    assert run.batches == [[1], [2, 3, 4]]
    await front.close()


async def test_while_a_batch_runs_the_next_waits_for_the_window(tier: Tier, clock: FakeClock) -> None:
    # A long window (10 s): the loop's real wait never ends by itself during the test; the fake clock
    # says when the window is over, and the next submit wakes the loop to see it.
    run = gated(tier, clock)
    front = tier.make(clock, run, max_batch_size=4, max_delay_ms=10_000, max_concurrency=2)
    busy = tier.submit(front, [1])
    await settle()
    second = tier.submit(front, [2])
    await settle()
    clock.advance(6.0)
    third = tier.submit(front, [3])  # wakes the loop: the oldest has waited 6 of its 10 s
    await settle()
    assert run.batches == [[1]]  # a slot is free, but the window is still open
    clock.advance(4.0)
    fourth = tier.submit(front, [4])  # wakes the loop: the oldest has now waited the window
    await settle()
    assert run.batches == [[1], [2, 3, 4]]
    run.release.set()
    assert [await task for task in (busy, second, third, fourth)] == [[10], [20], [30], [40]]
    await front.close()


async def test_a_full_batch_does_not_wait_for_the_window(tier: Tier, clock: FakeClock) -> None:
    run = gated(tier, clock)
    front = tier.make(clock, run, max_batch_size=4, max_delay_ms=10_000, max_concurrency=2)
    busy = tier.submit(front, [1])
    await settle()
    full = tier.submit(front, [2, 3, 4, 5])
    await settle()
    assert run.batches == [[1], [2, 3, 4, 5]]
    run.release.set()
    assert await full == [20, 30, 40, 50] and await busy == [10]
    await front.close()


async def test_at_most_max_concurrency_batches_run_at_once(tier: Tier, clock: FakeClock) -> None:
    run = gated(tier, clock)
    front = tier.make(clock, run, max_batch_size=1, max_concurrency=2)
    tasks = [tier.submit(front, [i]) for i in (1, 2, 3)]
    await settle()
    assert run.batches == [[1], [2]] and front.queue_depth == 1
    run.release.set()
    assert [await task for task in tasks] == [[10], [20], [30]]
    await front.close()


async def test_cancelled_caller_leaves_the_queue_at_once_and_never_runs(tier: Tier, clock: FakeClock) -> None:
    run = gated(tier, clock)
    front = tier.make(clock, run, max_batch_size=8, max_concurrency=1)
    busy = tier.submit(front, [1])
    await settle()
    gone = tier.submit(front, [2, 3])
    kept = tier.submit(front, [4])
    await settle()
    assert front.queue_depth == 3
    gone.cancel()
    await settle()
    assert front.queue_depth == 1
    run.release.set()
    assert await busy == [10] and await kept == [40]
    assert run.batches == [[1], [4]]
    with pytest.raises(asyncio.CancelledError):
        await gone
    await front.close()


async def test_caller_cancelled_while_its_batch_runs_does_not_disturb_the_others(tier: Tier, clock: FakeClock) -> None:
    run = gated(tier, clock)
    front = tier.make(clock, run, max_batch_size=8, max_concurrency=2)
    busy = tier.submit(front, [1])
    await settle()
    gone = tier.submit(front, [2])
    kept = tier.submit(front, [3])
    await settle()
    assert run.batches == [[1], [2, 3]]
    gone.cancel()  # its result comes after it left: set only if not done, never an InvalidStateError
    await settle()
    run.release.set()
    assert await kept == [30] and await busy == [10]
    with pytest.raises(asyncio.CancelledError):
        await gone
    await front.close()


async def test_a_failed_batch_fails_only_its_callers_and_the_loop_goes_on(tier: Tier, clock: FakeClock) -> None:
    async def one_fails(entries: list[Any]) -> list[int]:
        values = [tier.value_of(entry) for entry in entries]
        if 1 in values:
            raise ValueError("model exploded")
        return [value * 10 for value in values]

    front = tier.make(clock, one_fails, max_batch_size=4)
    with pytest.raises(ValueError, match="model exploded"):
        await tier.submit(front, [1])
    assert await tier.submit(front, [2, 3]) == [20, 30]
    assert front.queue_depth == 0
    await front.close()


async def test_queue_is_bounded(tier: Tier, clock: FakeClock) -> None:
    run = gated(tier, clock)
    front = tier.make(clock, run, max_batch_size=2, max_queue=4, max_concurrency=1)
    running = tier.submit(front, [1, 2])
    await settle()
    queued = tier.submit(front, [3, 4, 5, 6])
    await settle()
    with pytest.raises(QueueFullError, match="4 items queued, limit 4"):
        await asyncio.wait_for(tier.submit(front, [7]), 1.0)  # real time only to fail fast, not hang
    run.release.set()
    assert await running == [10, 20] and await queued == [30, 40, 50, 60]
    await front.close()


async def test_run_batch_error_reaches_every_caller_of_that_batch_and_the_report(tier: Tier, clock: FakeClock) -> None:
    release = asyncio.Event()
    reports: list[BatchReport] = []

    async def broken(entries: list[Any]) -> list[int]:
        await release.wait()
        raise ValueError("model exploded")

    front = tier.make(clock, broken, max_batch_size=4, on_batch=reports.append)
    callers = [tier.submit(front, [1, 2]), tier.submit(front, [3])]
    await settle()
    release.set()
    for caller in callers:
        with pytest.raises(ValueError, match="model exploded"):
            await asyncio.wait_for(caller, 1.0)  # real time only to fail fast, not hang
    assert [(report.size, type(report.error)) for report in reports] == [(3, ValueError)]
    await front.close()


async def test_wrong_result_count_is_a_typed_error(tier: Tier, clock: FakeClock) -> None:
    async def short(entries: list[Any]) -> list[int]:
        return [0] * (len(entries) - 1)

    front = tier.make(clock, short, max_batch_size=4)
    with pytest.raises(BatchResultError, match="1 results for 2 items"):
        await asyncio.wait_for(tier.submit(front, [1, 2]), 1.0)  # real time only to fail fast, not hang
    await front.close()


async def test_close_finishes_accepted_work_and_refuses_new_work(tier: Tier, clock: FakeClock) -> None:
    reports: list[BatchReport] = []
    run = gated(tier, clock)
    front = tier.make(clock, run, max_batch_size=1, max_concurrency=2, on_batch=reports.append)
    accepted = [tier.submit(front, [i]) for i in (1, 2, 3)]
    await settle()
    assert run.batches == [[1], [2]] and front.queue_depth == 1
    closing = asyncio.create_task(front.close())
    await settle()
    assert not closing.done()  # two batches are still running and one is queued
    with pytest.raises(BatcherClosedError, match="shutting down"):
        await asyncio.wait_for(tier.submit(front, [9]), 1.0)  # real time only to fail fast, not hang
    run.release.set()
    await closing
    assert len(reports) == 3  # close returned after the last batch, not after the last dispatch
    assert [await task for task in accepted] == [[10], [20], [30]]
    assert run.batches == [[1], [2], [3]]


async def test_close_waits_for_the_batches_still_running(tier: Tier, clock: FakeClock) -> None:
    run = gated(tier, clock)
    front = tier.make(clock, run, max_batch_size=1, max_concurrency=2)
    accepted = [tier.submit(front, [i]) for i in (1, 2)]
    await settle()
    assert run.batches == [[1], [2]] and front.queue_depth == 0
    closing = asyncio.create_task(front.close())
    await settle()
    assert not closing.done()  # nothing is queued, but two batches still run
    run.release.set()
    await closing
    assert [await task for task in accepted] == [[10], [20]]


async def test_a_caller_cancelled_just_before_its_batch_forms_is_left_out(tier: Tier, clock: FakeClock) -> None:
    run = gated(tier, clock)
    front = tier.make(clock, run, max_batch_size=8)
    busy = tier.submit(front, [1])
    await settle()
    gone = tier.submit(front, [2])
    kept = tier.submit(front, [3])
    await settle()
    run.release.set()
    await asyncio.sleep(0)  # the busy batch ends and frees the slot: the loop forms the next batch first ...
    gone.cancel()  # ... while this caller's entry is still queued (its future is already cancelled)
    await settle()
    assert await busy == [10] and await kept == [30]
    assert run.batches == [[1], [3]]
    await front.close()


async def test_report_gives_sizes_waits_run_time_and_the_top_priority(tier: Tier, clock: FakeClock) -> None:
    reports: list[BatchReport] = []
    run = gated(tier, clock, duration=0.25)
    front = tier.make(clock, run, max_batch_size=8, starvation_limit_ms=10_000, on_batch=reports.append)
    first = tier.submit(front, [1])
    await settle()
    queued = tier.submit(front, [2])
    await settle()
    clock.advance(0.5)
    urgent = tier.submit(front, [3], urgent=True)
    await settle()
    clock.advance(0.5)
    run.release.set()
    await asyncio.gather(first, queued, urgent)
    await front.close()
    assert [report.size for report in reports] == [1, 2]
    assert run.batches[1] == [3, 2]  # the urgent item first
    second = reports[1]  # started at +1.25: the first batch ran 0.25 s
    assert second.item_waits_s == pytest.approx((0.75, 1.25))
    assert second.queue_wait_s == pytest.approx(1.25)  # the oldest item's, wherever it is in the batch
    assert second.run_s == pytest.approx(0.25) and second.error is None
    assert second.top_priority == tier.urgent and reports[0].top_priority != tier.urgent


async def test_a_batch_runs_in_its_first_callers_context(tier: Tier, clock: FakeClock) -> None:
    seen: list[str] = []
    release = asyncio.Event()

    async def run_batch(entries: list[Any]) -> list[int]:
        seen.append(CALLER.get())
        CALLER.set("changed by the batch")  # stays inside the batch's own copy
        await release.wait()
        return [tier.value_of(entry) * 10 for entry in entries]

    front = tier.make(clock, run_batch, max_batch_size=8, max_concurrency=1)

    async def call(name: str, value: int) -> list[Any]:
        CALLER.set(name)
        return await tier.submit(front, [value])

    first = asyncio.create_task(call("first", 1))
    await settle()
    rest = [asyncio.create_task(call(name, value)) for name, value in (("second", 2), ("third", 3))]
    await settle()
    release.set()
    assert await first == [10] and [await task for task in rest] == [[20], [30]]
    await front.close()
    assert seen == ["first", "second"]  # batch 2 = second + third, in second's context
    assert CALLER.get() == "none"


@dataclass(eq=False)
class _Entry:
    value: int
    enqueued: float = 0.0
    priority: int = 0


class _NeverRemovingQueue:
    """A FIFO policy that never takes an entry out on `remove`, as a lazy policy might."""

    def __init__(self) -> None:
        self.entries: list[_Entry] = []

    def __len__(self) -> int:
        return len(self.entries)

    def push(self, entry: _Entry) -> None:
        self.entries.append(entry)

    def remove(self, entry: _Entry) -> bool:
        return False

    def pop_batch(self, now: float, max_items: int) -> tuple[list[_Entry], list[_Entry]]:
        batch, self.entries = self.entries[:max_items], self.entries[max_items:]
        return batch, []

    def oldest_enqueued(self) -> float | None:
        return self.entries[0].enqueued if self.entries else None


async def test_the_loop_drops_entries_whose_caller_is_gone_even_when_the_policy_kept_them(clock: FakeClock) -> None:
    run: GatedBatchRun[int] = GatedBatchRun(clock, value_of=lambda entry: entry.value)
    run.release.clear()
    loop: BatchLoop[_Entry, Any] = BatchLoop(run, _NeverRemovingQueue(), max_batch_size=8, clock=clock)
    loop.start()
    busy = asyncio.create_task(loop.submit([_Entry(1)]))
    await settle()
    gone = asyncio.create_task(loop.submit([_Entry(2)]))
    kept = asyncio.create_task(loop.submit([_Entry(3)]))
    await settle()
    gone.cancel()
    await settle()
    assert loop.queue_depth == 2  # the policy still holds the cancelled entry
    run.release.set()
    assert await busy == [10] and await kept == [30]
    assert run.batches == [[1], [3]]
    await loop.close()


async def test_a_submit_that_times_out_leaves_the_queue_and_never_runs(clock: FakeClock) -> None:
    run: GatedBatchRun[int] = GatedBatchRun(clock, value_of=lambda entry: entry.value)
    run.release.clear()
    loop: BatchLoop[Any, int] = BatchLoop(run, _FifoQueue(), max_batch_size=2, max_concurrency=1, clock=clock)
    loop.start()
    running = asyncio.create_task(loop.submit([_Entry(1, clock())]))
    await settle()  # batch [1] runs (gated)
    with pytest.raises(TimeoutError):
        await loop.submit([_Entry(2, clock()), _Entry(3, clock())], timeout_s=0.01)  # queued behind it
    assert loop.queue_depth == 0  # both left the queue
    with pytest.raises(TimeoutError):
        await loop.submit([_Entry(4, clock())], timeout_s=0.01)  # one entry: the path without gather
    run.release.set()
    assert await running == [10]
    assert await loop.submit([_Entry(5, clock())], timeout_s=5.0) == [50]  # in time: the timer is cancelled
    assert run.batches == [[1], [5]]
    await loop.close()



class _FifoQueue(_NeverRemovingQueue):
    """First in, first out; `remove` takes the entry out."""

    def remove(self, entry: _Entry) -> bool:
        if entry in self.entries:
            self.entries.remove(entry)
            return True
        return False


def test_urgent_slots_need_a_queue_that_can_serve_urgent_entries_alone() -> None:
    async def run(entries: list[Any]) -> list[Any]:
        return list(entries)

    with pytest.raises(TypeError, match="urgent_slots: _FifoQueue cannot serve urgent entries alone"):
        BatchLoop(run, _FifoQueue(), max_batch_size=2, urgent_slots=1)
    with pytest.raises(ValueError, match="urgent_slots must be >= 0"):
        BatchLoop(run, _FifoQueue(), max_batch_size=2, urgent_slots=-1)
