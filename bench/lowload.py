"""Low load: one text item per second through the router, and what the mesh adds to the model's time.

At 1 request/s nothing queues, so P50 minus the model's own time is the mesh's fixed cost per item:
two gRPC hops, validation, batching decisions, fusion. The model's own time is read two ways:
the text service's ModelStatistics compute time per item during this scenario (`infer` in the
service, batch of 1), and the direct in-process batch-1 time (`bench/direct.py`) when it was measured.

Example::

    result = await run_lowload(sender, probe, requests=30)
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


async def run_lowload(sender: Sender, probe: StatsProbe, *, requests: int, direct_batch1_ms: float | None = None,
                      tenant: str = REALTIME.id) -> dict[str, Any]:
    """Send `requests` text items one second apart; P50 and the overhead over the model's time."""
    arrivals = [Arrival(i * INTERVAL_S, "text", tenant, i) for i in range(requests)]
    before = await probe.snapshot()
    outcomes = await run_open_loop(sender, arrivals)
    text = StatsProbe.delta(before, await probe.snapshot())["text"]
    latency = summarize_ms(o.latency_s for o in outcomes if o.ok)
    p50 = latency.get("p50_ms")
    compute = text["compute_ms_per_item"]
    result = {"rate_rps": 1.0 / INTERVAL_S, "requests": requests, "ok": sum(o.ok for o in outcomes),
              "latency_ms": latency, "text_service": text,
              "overhead_ms": round(p50 - compute, 3) if p50 is not None and compute is not None else None,
              "direct_batch1_ms": direct_batch1_ms,
              "overhead_vs_direct_ms": round(p50 - direct_batch1_ms, 3) if p50 is not None and direct_batch1_ms else None}
    print(f"[bench] low load: p50 {p50} ms, overhead {result['overhead_ms']} ms", file=sys.stderr, flush=True)
    return result
