"""Isolation: does a realtime tenant keep its latency while a bulk tenant floods the mesh?

Phase 1: the realtime tenant alone, at a modest open-loop rate (a share of the measured capacity).
Phase 2: the same again while a bulk tenant, in its own process (`bench/flood.py`), offers a multiple
(5x by default) of the mesh's measured capacity. Both send text items through the router, each to
the router lane of its QoS class (config/router.yaml `lanes`: the flood goes to the bulk lane). Reported:
the realtime tenant's P99 with the flood / alone, its success ratio, and the bulk tenant's rejection
latency (time to a RESOURCE_EXHAUSTED / DEADLINE_EXCEEDED / UNAVAILABLE / CANCELLED answer) and what it managed
to send (the flood's generator shares the two cores with everything else: see `bulk.sent_rps`).

Example::

    result = await run_isolation(bulk_lane_address, channel, probe, inputs, capacity_rps=900.0, slo=Slo(), plan=Plan.quick())
    result["p99_ratio"], result["bulk"]["rejection_latency_ms"]["p99_ms"]
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from typing import Any

import grpc

from bench.cpu import ProcessCpu
from bench.loadgen import poisson_arrivals
from bench.modelstats import StatsProbe
from bench.payloads import BenchInputs
from bench.router_target import RouterSender
from bench.scenarios import BULK, REALTIME, Plan, Slo
from bench.stats import ratio, summarize_ms
from bench.steps import measured, step_report, wait_idle
from services.launcher import ROOT

FLOOD_WARMUP_S = 0.5   # let the flood fill the queues before the realtime phase starts
FLOOD_DEADLINE_MS = 2000.0


async def realtime_phase(sender: RouterSender, probe: StatsProbe, rate_rps: float, slo: Slo, plan: Plan,
                         seed: int, cpu: ProcessCpu | None) -> dict[str, Any]:
    """The realtime tenant's text traffic for `plan.isolation_s`, reported like a load step (CPU per
    request is per *realtime* request)."""
    arrivals = poisson_arrivals(rate_rps, plan.isolation_s, kinds={"text": 1.0}, tenants={REALTIME.id: 1.0}, seed=seed)
    errors_before, degraded_before = Counter(sender.error_details), sender.degraded[REALTIME.id]
    outcomes, extra = await measured(sender, arrivals, probe, cpu)
    return {**step_report(rate_rps, plan.isolation_s, outcomes, slo), **extra,
            "service_latency_ms": summarize_ms(o.service_s for o in outcomes),
            "degraded": sender.degraded[REALTIME.id] - degraded_before,
            "error_details": dict((sender.error_details - errors_before).most_common())}


async def start_flood(address: str, rate_rps: float, duration_s: float, nice: int = 0) -> asyncio.subprocess.Process:
    """Start `bench.flood` as the bulk tenant (at CPU niceness +`nice`) and wait for its `ready` line."""
    process = await asyncio.create_subprocess_exec(
        *(["nice", "-n", str(nice)] if nice else []), sys.executable, "-m", "bench.flood", "--address", address, "--key", BULK.key, "--rate", f"{rate_rps:.1f}",
        "--duration", f"{duration_s:.2f}", "--deadline-ms", f"{FLOOD_DEADLINE_MS:.0f}", cwd=ROOT,
        stdout=asyncio.subprocess.PIPE)
    assert process.stdout is not None  # stdout=PIPE above; narrows the type
    line = await asyncio.wait_for(process.stdout.readline(), timeout=60.0)
    if line.strip() != b"ready":
        process.kill()
        raise RuntimeError(f"bench.flood did not start (first line {line!r}, exit code {await process.wait()})")
    return process


async def run_isolation(flood_address: str, channel: grpc.aio.Channel, probe: StatsProbe, inputs: BenchInputs, *,
                        capacity_rps: float, slo: Slo, plan: Plan, seed: int = 100,
                        cpu: ProcessCpu | None = None) -> dict[str, Any]:
    """Both phases and the ratios (see the module docstring): the realtime tenant on `channel`, the flood
    on `flood_address` (the bulk tenant's router lane); `cpu` adds the flood process's CPU."""
    realtime_rps = round(max(plan.realtime_min_rps, plan.realtime_share * capacity_rps), 1)
    flood_rps = round(plan.flood_factor * capacity_rps, 1)
    sender = RouterSender(channel, inputs, keys={REALTIME.id: REALTIME.key}, deadlines_s=slo.deadlines_s())
    alone = await realtime_phase(sender, probe, realtime_rps, slo, plan, seed, cpu)
    print(f"[bench] isolation: realtime alone p99 {alone['latency_ms'].get('p99_ms')} ms", file=sys.stderr, flush=True)
    await wait_idle(probe)
    flood = await start_flood(flood_address, flood_rps, FLOOD_WARMUP_S + plan.isolation_s + 0.5, plan.flood_nice)
    await asyncio.sleep(FLOOD_WARMUP_S)
    flood_cpu = ProcessCpu({**cpu.pids, "flood": flood.pid}) if cpu else None
    with_flood = await realtime_phase(sender, probe, realtime_rps, slo, plan, seed + 1, flood_cpu)
    out, _ = await flood.communicate()
    if flood.returncode != 0:
        raise RuntimeError(f"bench.flood exited with code {flood.returncode}")
    bulk = json.loads(out.decode().strip())
    print(f"[bench] isolation: realtime with flood p99 {with_flood['latency_ms'].get('p99_ms')} ms, "
          f"bulk sent {bulk['sent_rps']}/s {bulk['status']}", file=sys.stderr, flush=True)
    await wait_idle(probe, timeout_s=30.0)
    return {"capacity_rps": capacity_rps,
            "realtime": {"tenant": REALTIME.id, "qos_class": REALTIME.qos_class, "offered_rps": realtime_rps},
            "bulk_tenant": {"tenant": BULK.id, "qos_class": BULK.qos_class, "offered_rps": flood_rps, "address": flood_address,
                            "deadline_ms": FLOOD_DEADLINE_MS, "generator_nice": plan.flood_nice},
            "alone": alone, "with_flood": with_flood,
            "p99_ratio": ratio(with_flood["latency_ms"].get("p99_ms"), alone["latency_ms"].get("p99_ms")),
            "realtime_success_ratio_with_flood": with_flood["success_ratio"], "bulk": bulk}
