"""Paired knees: two or more targets measured at the same offered rates, step by step, in turn, each
step repeated, so a transient spike or a busy moment of a shared machine hits one repeat of one target,
not a whole knee search, and every ratio compares knees from the same run.

For each rate of a geometric ladder (`start_rps` x `growth`), every target runs `repeats` steps, the
targets interleaved (A, B, A, B, ...); a rate passes for a target when the median of its repeats'
P99 meets the SLO and the median OK fraction is >= 99 %. A target's knee is the highest passing rate
below its first failing one (`knee_of`, pure); the ladder stops when every target has failed once.
The knee interval is [knee, next rate): the true knee lies between them.

A benchmark script built on it takes the ladder's options (`add_ladder_arguments`, `parse_ladder_args`,
`LadderPlan.from_args`) and reports each step with `step_report`.

Example::

    knees = await paired_knees({"ours": send_ours, "triton": send_triton}, plan, step)
    knees["ours"]["knee_rps"], knees["ours"]["knee_interval_rps"]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping, Sequence

from bench.loadgen import Outcome
from bench.stats import status_counts, summarize_ms

#: One step: (target name, offered rate, repeat index) -> its report (must hold "p99_ms", "ok_fraction").
Step = Callable[[str, float, int], Awaitable[dict[str, Any]]]
MIN_OK_FRACTION = 0.99
#: `--quick`: a smoke run's ladder (tiny steps, one repeat; the numbers mean nothing).
QUICK_LADDER = {"step_s": 0.5, "start_rps": 20.0, "max_steps": 2, "repeats": 1}


@dataclass(frozen=True)
class LadderPlan:
    start_rps: float = 100.0
    growth: float = 1.3
    max_rungs: int = 10
    repeats: int = 2
    slo_ms: float = 50.0

    def rates(self) -> list[float]:
        return [round(self.start_rps * self.growth ** i, 1) for i in range(self.max_rungs)]

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> LadderPlan:
        """The plan the options of `add_ladder_arguments` describe."""
        return cls(args.start_rps, args.growth, args.max_steps, args.repeats, args.slo_ms)


def add_ladder_arguments(parser: argparse.ArgumentParser, *, max_steps: int,
                         quick_help: str = "smoke run: tiny steps, no meaningful numbers") -> None:
    """The rate-ladder options of a paired-knee benchmark: --slo-ms, --step-s, --start-rps, --growth,
    --max-steps, --repeats and --quick (`parse_ladder_args` applies it)."""
    parser.add_argument("--slo-ms", type=float, default=50.0, help="P99 target per item (default 50)")
    parser.add_argument("--step-s", type=float, default=4.0, help="seconds per offered-rate step (default 4)")
    parser.add_argument("--start-rps", type=float, default=100.0, help="first offered rate (default 100)")
    parser.add_argument("--growth", type=float, default=1.3, help="rate ladder factor (default 1.3)")
    parser.add_argument("--max-steps", type=int, default=max_steps,
                        help=f"rungs of the rate ladder (default {max_steps})")
    parser.add_argument("--repeats", type=int, default=3, help="steps per rung and target (default 3; median)")
    parser.add_argument("--quick", action="store_true", help=quick_help)


def parse_ladder_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """`parser.parse_args(argv)`, with `QUICK_LADDER` in place of the ladder options under --quick."""
    args = parser.parse_args(argv)
    if args.quick:
        vars(args).update(QUICK_LADDER)
    return args


def step_report(rate_rps: float, outcomes: Sequence[Outcome], elapsed_s: float) -> dict[str, Any]:
    """One step's report at offered rate `rate_rps`: what `rung_passed` reads (p99_ms, ok_fraction)
    plus the OK rate, the latency summary, the status codes and the load generator's own lag."""
    ok = sum(1 for o in outcomes if o.ok)
    latency = summarize_ms(o.latency_s for o in outcomes)
    return {"offered_rps": round(rate_rps, 1), "items": len(outcomes), "ok_rps": round(ok / elapsed_s, 1),
            "ok_fraction": round(ok / max(1, len(outcomes)), 4), "p99_ms": latency.get("p99_ms"),
            "latency": latency, "codes": status_counts(o.code for o in outcomes),
            "generator_lag_p99_ms": summarize_ms(o.lag_s for o in outcomes).get("p99_ms")}


def rung_passed(reports: Sequence[Mapping[str, Any]], slo_ms: float) -> bool:
    """The median P99 meets `slo_ms` and the median OK fraction is >= 99 %.

    Example::

        >>> rung_passed([{"p99_ms": 20, "ok_fraction": 1.0}, {"p99_ms": 90, "ok_fraction": 1.0}, {"p99_ms": 30, "ok_fraction": 1.0}], 50)
        True
    """
    p99 = statistics.median(r["p99_ms"] if r["p99_ms"] is not None else float("inf") for r in reports)
    ok = statistics.median(r["ok_fraction"] for r in reports)
    return bool(p99 <= slo_ms and ok >= MIN_OK_FRACTION)


def knee_of(passed: Sequence[tuple[float, bool]]) -> tuple[float | None, float | None]:
    """(knee, first failing rate above it) from (rate, passed) in ladder order.

    Example::

        >>> knee_of([(100, True), (130, True), (169, False), (219.7, True)])
        (130, 169)
    """
    knee = None
    for rate, ok in passed:
        if not ok:
            return knee, rate
        knee = rate
    return knee, None


async def paired_knees(targets: Sequence[str], step: Step, plan: LadderPlan, label: str = "") -> dict[str, Any]:
    """Each target's knee, its interval and every rung's reports (see the module docstring)."""
    rungs: dict[str, list[dict[str, Any]]] = {t: [] for t in targets}
    failed: set[str] = set()
    for rate in plan.rates():
        active = [t for t in targets if t not in failed]
        if not active:
            break
        reports: dict[str, list[dict[str, Any]]] = {t: [] for t in active}
        for repeat in range(plan.repeats):
            for target in active:
                report = await step(target, rate, repeat)
                reports[target].append(report)
                print(f"{label}{target} @ {rate}/s #{repeat}: {json.dumps(report)}", file=sys.stderr)
                await asyncio.sleep(0.5)  # let the queues drain
        for target in active:
            ok = rung_passed(reports[target], plan.slo_ms)
            rungs[target].append({"offered_rps": rate, "passed": ok, "repeats": reports[target]})
            if not ok:
                failed.add(target)
    result: dict[str, Any] = {}
    for target in targets:
        knee, above = knee_of([(r["offered_rps"], r["passed"]) for r in rungs[target]])
        at_knee = next((r for r in rungs[target] if r["offered_rps"] == knee), None)
        result[target] = {"knee_rps": knee, "knee_interval_rps": [knee, above],
                          "p99_ms_at_knee": [r["p99_ms"] for r in at_knee["repeats"]] if at_knee else None,
                          "rungs": rungs[target]}
    return result
