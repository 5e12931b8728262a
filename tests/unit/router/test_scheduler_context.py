"""FairScheduler runs each batch in the contextvars context of its first job's caller, so the active
trace span (or any request-scoped value) reaches run_batch and the downstream call it makes."""

from __future__ import annotations

import asyncio
import contextvars
import time

from services.router.fair_queue import Job
from services.router.scheduler import FairScheduler, Requester, SchedulingConfig

CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="none")


async def test_a_batch_runs_in_its_first_jobs_context() -> None:
    seen: list[str] = []
    release = asyncio.Event()

    async def run_batch(jobs: list[Job]) -> list[str]:
        seen.append(CALLER.get())
        CALLER.set("changed by the batch")  # stays inside the batch's own copy
        await release.wait()
        return [str(job.payload) for job in jobs]

    scheduler: FairScheduler[str] = FairScheduler(run_batch, config=SchedulingConfig(max_batch_size=8, max_delay_ms=0,
                                                                                     max_concurrency=1))
    scheduler.start()

    async def call(name: str) -> list[str]:
        CALLER.set(name)
        return await scheduler.submit(Requester(name), [name], deadline=time.monotonic() + 60)

    first = asyncio.create_task(call("first"))
    for _ in range(5):
        await asyncio.sleep(0)
    rest = [asyncio.create_task(call(name)) for name in ("second", "third")]
    for _ in range(5):
        await asyncio.sleep(0)
    release.set()
    assert await first == ["first"] and [await task for task in rest] == [["second"], ["third"]]
    await scheduler.close()
    assert seen == ["first", "second"]  # batch 2 = second + third, in second's context
    assert CALLER.get() == "none"
