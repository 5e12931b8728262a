"""Load steps and the knee sweep: run one offered rate, report it, and step the rate up to the knee.

A step offers a Poisson rate for a fixed time (open loop, `bench/loadgen.py`), reads the modality
services' statistics before and after (mean batch size per modality), then waits until the services
are idle so the next step starts from empty queues.

Example::

    result = await sweep(sender, probe, MIXES["text"], {"chat": 1.0}, Slo(), Plan.quick())
    result["knee_offered_rps"], result["steps"][0]["latency_ms"]["p99_ms"]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from typing import Any, Mapping, Sequence

from bench.cpu import ProcessCpu
from bench.knee import KneeSearch
from bench.loadgen import Arrival, Outcome, Sender, poisson_arrivals, run_open_loop
from bench.modelstats import StatsProbe
from bench.scenarios import Mix, Plan, Slo
from bench.stats import status_counts, summarize_ms


def _group(outcomes: Sequence[Outcome], key: str) -> dict[str, list[Outcome]]:
    groups: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        groups.setdefault(getattr(outcome.arrival, key), []).append(outcome)
    return groups


def step_report(rate_rps: float, duration_s: float, outcomes: Sequence[Outcome], slo: Slo) -> dict[str, Any]:
    """Offered and achieved rate, latency (all calls, from the scheduled time), per kind against the
    SLO, per tenant, status counts, generator lag, and whether the step passes.

    `achieved_rps` = OK answers / (first scheduled send to last answer), vegeta's "throughput": it
    falls below the offered rate when answers come late or fail."""
    ok = sum(o.ok for o in outcomes)
    span = max((o.done for o in outcomes), default=0.0) - min((o.scheduled for o in outcomes), default=0.0)
    success = ok / len(outcomes) if outcomes else 0.0
    by_kind: dict[str, Any] = {}
    for kind, group in sorted(_group(outcomes, "kind").items()):
        latency = summarize_ms(o.latency_s for o in group)
        by_kind[kind] = {**latency, "slo_p99_ms": slo.p99_ms[kind], "meets_slo": latency["p99_ms"] <= slo.p99_ms[kind]}
    by_tenant = {tenant: {"n": len(group), "ok": sum(o.ok for o in group),
                          "p99_ms": summarize_ms(o.latency_s for o in group)["p99_ms"]}
                 for tenant, group in sorted(_group(outcomes, "tenant").items())}
    passed = bool(outcomes) and success >= slo.min_success and all(k["meets_slo"] for k in by_kind.values())
    return {"offered_rps": rate_rps, "duration_s": round(duration_s, 3), "sent": len(outcomes),
            "achieved_rps": round(ok / max(duration_s, span), 2), "success_ratio": round(success, 5),
            "latency_ms": summarize_ms(o.latency_s for o in outcomes), "by_kind": by_kind, "by_tenant": by_tenant,
            "status": status_counts(o.code for o in outcomes),
            "generator_lag_ms": summarize_ms(o.lag_s for o in outcomes), "passed": passed}


async def wait_idle(probe: StatsProbe, *, interval_s: float = 0.1, timeout_s: float = 15.0) -> None:
    """Return once no modality service has started a batch for `interval_s` (or after `timeout_s`)."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + timeout_s
    previous = await probe.snapshot()
    while loop.time() < give_up:
        await asyncio.sleep(interval_s)
        current = await probe.snapshot()
        if all(current[m].execution_count == previous[m].execution_count for m in current):
            return
        previous = current


async def measured(sender: Sender, arrivals: Sequence[Arrival], probe: StatsProbe,
                   cpu: ProcessCpu | None) -> tuple[list[Outcome], dict[str, Any]]:
    """Run `arrivals` open loop; the outcomes, and each service's batches and each process's CPU meanwhile."""
    before, cpu_before, started = await probe.snapshot(), cpu.snapshot() if cpu else {}, time.monotonic()
    outcomes = await run_open_loop(sender, arrivals)
    wall, cpu_after = time.monotonic() - started, cpu.snapshot() if cpu else {}
    extra: dict[str, Any] = {"batches": StatsProbe.delta(before, await probe.snapshot())}
    if cpu:
        extra["cpu"] = ProcessCpu.usage(cpu_before, cpu_after, wall_s=wall, requests=len(outcomes))
    return outcomes, extra


async def run_step(sender: Sender, probe: StatsProbe, mix: Mix, tenants: Mapping[str, float], rate_rps: float,
                   slo: Slo, plan: Plan, *, seed: int, cpu: ProcessCpu | None = None) -> dict[str, Any]:
    """Offer `rate_rps` of `mix` from `tenants` (id -> share) and report it (see `step_report`), with
    the batches of each modality service and, given `cpu`, each process's CPU use."""
    duration = plan.step_duration_s(rate_rps)
    arrivals = poisson_arrivals(rate_rps, duration, kinds=mix.kinds, tenants=tenants, seed=seed)
    outcomes, extra = await measured(sender, arrivals, probe, cpu)
    report = {**step_report(rate_rps, duration, outcomes, slo), **extra}
    await wait_idle(probe)
    return report


def _progress(label: str, step: Mapping[str, Any]) -> None:
    latency = step["latency_ms"]
    print(f"[bench] {label}: offered {step['offered_rps']:.1f}/s achieved {step['achieved_rps']:.1f}/s "
          f"p99 {latency.get('p99_ms', float('nan'))} ms ok {step['success_ratio']:.3f} "
          f"{'pass' if step['passed'] else 'FAIL'}", file=sys.stderr, flush=True)


async def sweep(sender: Sender, probe: StatsProbe, mix: Mix, tenants: Mapping[str, float], slo: Slo, plan: Plan,
                *, label: str = "", cpu: ProcessCpu | None = None) -> dict[str, Any]:
    """Step the offered rate up to the knee (bench/knee.py, the bracket repeated `plan.repeats` times);
    every step's report, the knee (`knee_summary`) and the capacity: `capacity_rps` is the highest
    achieved rate of any step, SLO met or not."""
    search = KneeSearch(mix.start_rps * plan.start_scale, growth=plan.growth, precision=plan.precision,
                        max_steps=plan.max_steps, max_rps=mix.max_rps, min_rps=mix.start_rps * plan.start_scale / 16,
                        repeats=plan.repeats)
    steps: list[dict[str, Any]] = []
    rate = search.next_rate()
    while rate is not None:
        step = await run_step(sender, probe, mix, tenants, rate, slo, plan, seed=plan.seed + len(steps), cpu=cpu)
        _progress(f"{label} {mix.name}", step)
        steps.append(step)
        search.record(rate, passed=step["passed"])
        rate = search.next_rate()
    return {"mix": dict(mix.kinds), "slo_p99_ms": {k: slo.p99_ms[k] for k in mix.kinds}, **knee_summary(search, steps),
            "capacity_rps": max((s["achieved_rps"] for s in steps), default=0.0),
            "steps": sorted(steps, key=lambda s: float(s["offered_rps"]))}


def knee_summary(search: KneeSearch, steps: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The knee and what was measured at it, over the runs at the knee's rate (medians), and the knee's
    interval over repeated runs (`knee_interval_rps`, KneeSearch.interval; goodput alike).

    `knee_goodput_rps` (offered x success ratio at the knee: the load the path sustained within the
    SLO) is what the ratios compare."""
    knee, interval = search.knee, search.interval
    at_knee = [s for s in steps if s["offered_rps"] == knee]
    if knee is None or not at_knee or interval is None:
        return {"knee_offered_rps": None, "knee_goodput_rps": None, "knee_achieved_rps": None, "knee_p99_ms": None,
                "knee_interval_rps": None, "knee_goodput_interval_rps": None, "knee_runs": None}
    success = statistics.median(s["success_ratio"] for s in at_knee)
    low, high = interval
    return {"knee_offered_rps": knee, "knee_goodput_rps": round(knee * success, 2),
            "knee_achieved_rps": statistics.median(s["achieved_rps"] for s in at_knee),
            "knee_p99_ms": statistics.median(s["latency_ms"]["p99_ms"] for s in at_knee),
            "knee_interval_rps": [low, high],
            # The interval's ends as goodput: the SLO allows 1 % failures, so a passing step's goodput
            # is at least 0.99 x its rate.
            "knee_goodput_interval_rps": [round(low * success, 2), None if high is None else round(high * success, 2)],
            "knee_runs": {str(rate): outcomes for rate, outcomes in sorted(search.runs.items())}}
