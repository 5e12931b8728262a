"""bench/paired.py: the ladder options every paired-knee benchmark shares, and the step report its
knee search reads."""

from __future__ import annotations

import argparse

from bench.loadgen import Arrival, Outcome
from bench.paired import QUICK_LADDER, LadderPlan, add_ladder_arguments, parse_ladder_args, rung_passed, step_report
from bench.triton_text import parse_args as triton_args
from bench.verdict_cache import parse_args as cache_args


def _parser(max_steps: int) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_ladder_arguments(parser, max_steps=max_steps)
    return parser


def test_the_options_make_the_plan() -> None:
    args = parse_ladder_args(_parser(7), ["--slo-ms", "80", "--start-rps", "50", "--growth", "2", "--repeats", "1"])
    assert LadderPlan.from_args(args) == LadderPlan(50.0, 2.0, 7, 1, 80.0)
    assert LadderPlan.from_args(args).rates()[:3] == [50.0, 100.0, 200.0]


def test_quick_replaces_the_ladder_and_keeps_the_slo() -> None:
    args = parse_ladder_args(_parser(7), ["--quick", "--slo-ms", "80", "--max-steps", "9"])
    assert {key: getattr(args, key) for key in QUICK_LADDER} == QUICK_LADDER and args.slo_ms == 80.0


def test_each_benchmark_keeps_its_own_defaults() -> None:
    assert triton_args([]).max_steps == 12 and cache_args([]).max_steps == 10
    assert cache_args(["--quick"]).ratios == [0.5] and cache_args([]).ratios == [0.0, 0.3, 0.6]


def test_step_report_counts_ok_and_feeds_the_rung_check() -> None:
    def outcome(index: int, latency_s: float, code: str) -> Outcome:
        return Outcome(Arrival(0.0, "text", "t", index), scheduled=1.0, sent=1.0, done=1.0 + latency_s, code=code)

    outcomes = [outcome(i, 0.010, "OK") for i in range(99)] + [outcome(99, 0.500, "DEADLINE_EXCEEDED")]
    report = step_report(100.0, outcomes, elapsed_s=2.0)
    assert report["items"] == 100 and report["ok_rps"] == 49.5 and report["ok_fraction"] == 0.99
    assert report["codes"] == {"OK": 99, "DEADLINE_EXCEEDED": 1}
    assert rung_passed([report], slo_ms=1000.0) and not rung_passed([report], slo_ms=5.0)
