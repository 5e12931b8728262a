"""Low load: one text item per second through the router, and what the mesh adds to the model's time.

At 1 request/s nothing queues, so P50 minus the model's own time is the mesh's fixed cost per item:
two gRPC hops, validation, batching decisions, fusion, and waking three idle processes. The model's
own time is read two ways: the text service's ModelStatistics compute time per item during this
scenario (`infer` in the service, batch of 1), and the direct in-process batch-1 time
(`bench/direct.py`) when it was measured. `overhead_ms` uses the P50 from the actual send (the
generator's timer slop, `generator_lag_ms`, is not the mesh's); `latency_ms` is from the schedule.
Half a second after each item, a grpc.health.v1 Check on the router over the same channel measures
the floor under it (`client_floor_ms`: the asyncio client, loopback and one gRPC hop, no work).

Example::

    result = await run_lowload(sender, HealthSender(channel), probe, requests=30)
    result["overhead_ms"]     # e.g. 1.9
"""

from __future__ import annotations

import sys
from typing import Any

from bench.loadgen import Arrival, Sender, run_open_loop
from bench.modelstats import StatsProbe
from bench.scenarios import REALTIME
from bench.stats import summarize_ms

INTERVAL_S = 1.0


class _WithFloor:
    """Sends `health` arrivals to `floor`, the others to `items`."""

    def __init__(self, items: Sender, floor: Sender) -> None:
        self._items, self._floor = items, floor

    async def __call__(self, arrival: Arrival) -> str:
        return await (self._floor if arrival.kind == "health" else self._items)(arrival)


async def run_lowload(sender: Sender, floor: Sender, probe: StatsProbe, *, requests: int,
                      direct_batch1_ms: float | None = None, tenant: str = REALTIME.id) -> dict[str, Any]:
    """Send `requests` text items one second apart (and a floor call between them); P50 and the
    overhead over the model's time."""
    arrivals = [Arrival(i * INTERVAL_S + offset, kind, tenant, i) for i in range(requests)
                for offset, kind in ((0.0, "text"), (INTERVAL_S / 2, "health"))]
    before = await probe.snapshot()
    outcomes = await run_open_loop(_WithFloor(sender, floor), arrivals)
    text = StatsProbe.delta(before, await probe.snapshot())["text"]
    ok = [o for o in outcomes if o.ok and o.arrival.kind == "text"]
    service = summarize_ms(o.service_s for o in ok)
    p50 = service.get("p50_ms")
    compute = text["compute_ms_per_item"]
    result = {"rate_rps": 1.0 / INTERVAL_S, "requests": requests, "ok": len(ok),
              "latency_ms": summarize_ms(o.latency_s for o in ok), "service_latency_ms": service,
              "generator_lag_ms": summarize_ms(o.lag_s for o in outcomes),
              "client_floor_ms": summarize_ms(o.service_s for o in outcomes if o.ok and o.arrival.kind == "health"),
              "text_service": text,
              "overhead_ms": round(p50 - compute, 3) if p50 is not None and compute is not None else None,
              "direct_batch1_ms": direct_batch1_ms,
              "overhead_vs_direct_ms": round(p50 - direct_batch1_ms, 3) if p50 is not None and direct_batch1_ms else None}
    print(f"[bench] low load: p50 {p50} ms, overhead {result['overhead_ms']} ms", file=sys.stderr, flush=True)
    return result
