"""CPU cost of the batching loop itself, per item, for both tiers, printed as JSON.

In process, no gRPC, no model: `callers` concurrent tasks each submit one item at a time to the
modality services' `DynamicBatcher` and to the router's `FairScheduler`, whose `run_batch` returns at
once. What is left is the loop's own work per item (future, queue policy, batch forming, settling,
report), which is what a change to the loop can make slower. Medians over `--rounds`.

Run from the repository root::

    python -m bench.batching_overhead --items 20000 --callers 64 --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from typing import Any, Awaitable, Callable, Sequence

from services.common.serving.batcher import BatchingConfig, DynamicBatcher
from services.router.scheduler import FairScheduler, Requester, SchedulingConfig


async def _echo(items: Sequence[Any]) -> list[Any]:
    return list(items)


async def _drive(submit: Callable[[int], Awaitable[Any]], items: int, callers: int) -> None:
    per_caller = items // callers

    async def caller(offset: int) -> None:
        for i in range(per_caller):
            await submit(offset + i)

    await asyncio.gather(*(caller(c * per_caller) for c in range(callers)))


async def _leveled_round(items: int, callers: int, max_batch_size: int) -> float:
    batcher: DynamicBatcher[int, Any] = DynamicBatcher(_echo, config=BatchingConfig(max_batch_size=max_batch_size))
    batcher.start()
    started = time.process_time()
    await _drive(lambda value: batcher.submit([value], priority=1 + value % 3), items, callers)
    spent = time.process_time() - started
    await batcher.close()
    return spent


async def _fair_round(items: int, callers: int, max_batch_size: int) -> float:
    config = SchedulingConfig(max_batch_size=max_batch_size, max_delay_ms=0, max_concurrency=1)
    scheduler: FairScheduler[Any] = FairScheduler(_echo, config=config)
    scheduler.start()
    requesters = [Requester(f"tenant-{i}", priority=i % 3) for i in range(8)]
    started = time.process_time()
    await _drive(lambda value: scheduler.submit(requesters[value % 8], [value], time.monotonic() + 60), items, callers)
    spent = time.process_time() - started
    await scheduler.close()
    return spent


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=20000)
    parser.add_argument("--callers", type=int, default=64)
    parser.add_argument("--max-batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"items": args.items, "callers": args.callers, "max_batch_size": args.max_batch_size,
                              "rounds": args.rounds}
    for name, round_ in (("leveled", _leveled_round), ("fair", _fair_round)):
        cpu_s = [asyncio.run(round_(args.items, args.callers, args.max_batch_size)) for _ in range(args.rounds)]
        per_item_us = [spent / args.items * 1e6 for spent in cpu_s]
        report[name] = {"cpu_us_per_item_median": round(statistics.median(per_item_us), 2),
                        "cpu_us_per_item": [round(value, 2) for value in per_item_us]}
        print(f"{name}: {report[name]['cpu_us_per_item_median']} us/item", file=sys.stderr)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
