"""The tracing benchmark's arithmetic: paired round ratios, the per-set median, the mean over sets with
its t-interval, and the overhead and control percentages in the report (no meshes are started here)."""

from __future__ import annotations

import argparse

import pytest

from bench.tracing_overhead import Round, mean_with_interval, paired_ratios, report


def rounds(*throughputs: float, cpu_s: float = 1.0) -> list[Round]:
    return [Round(requests=int(rps * 2), seconds=2.0, cpu_s={"router": cpu_s, "text": cpu_s / 2}, latencies_ms=[3.0])
            for rps in throughputs]


def test_each_round_is_compared_with_the_base_round_next_to_it() -> None:
    assert paired_ratios(rounds(1000, 500), rounds(950, 550)) == [0.95, 1.1]
    assert paired_ratios(rounds(0), rounds(100)) == []  # an empty base round says nothing


def test_mean_and_t_interval_over_sets() -> None:
    mean, (low, high) = mean_with_interval([0.95, 0.97, 0.96])
    assert mean == pytest.approx(0.96)
    # sd 0.01, three sets: t(2) = 4.303
    assert (low, high) == pytest.approx((0.96 - 4.303 * 0.01 / 3 ** 0.5, 0.96 + 4.303 * 0.01 / 3 ** 0.5))
    assert mean_with_interval([0.9]) == (0.9, (0.9, 0.9))
    assert mean_with_interval([]) == (0.0, (0.0, 0.0))


def test_the_report_gives_the_overhead_over_both_tracing_off_meshes_and_the_noise_floor() -> None:
    sets = [{"off": rounds(1000, 1000, 1000), "on": rounds(960, 950, 940), "control": rounds(1000, 1000, 1000)},
            {"off": rounds(1080, 1080, 1080), "on": rounds(1045, 1045, 1056), "control": rounds(1120, 1120, 1120)}]
    args = argparse.Namespace(ratio=0.01, sets=2, rounds=3, seconds=2.0, concurrency=16, pinned=True)
    document = report(sets, args)
    # set 1: 950 / 1000; set 2: 1045 / ((1080 + 1120) / 2) = 0.95
    assert document["ratio_on_over_baseline"] == {"mean": 0.95, "ci95": [0.95, 0.95], "per_set": [0.95, 0.95]}
    assert document["overhead_percent"] == 5.0 and document["overhead_percent_ci95"] == [5.0, 5.0]
    assert document["ratio_control_over_off"]["per_set"] == [1.0, 1.037]  # type: ignore[index]
    assert document["pinned"] is True
    assert float(str(document["cpu_ratio_on_over_baseline"])) > 1.0  # the same CPU seconds spread over fewer requests
    assert len(document["per_set"]) == 2  # type: ignore[arg-type]
