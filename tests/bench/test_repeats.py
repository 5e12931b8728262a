"""bench/repeats.py: knees over repeated sweeps and ratio ranges; a range crossing its target is not met."""

from __future__ import annotations

from bench.repeats import knee_interval, meets, ratio_interval


def test_knee_interval_reports_each_knee_the_median_and_the_range() -> None:
    interval = knee_interval([{"knee_goodput_rps": 900.0}, {"knee_goodput_rps": None}, {"knee_goodput_rps": 1000.0}])
    assert interval == {"knees": [900.0, 0.0, 1000.0], "median": 900.0, "low": 0.0, "high": 1000.0, "runs": 3}


def test_a_ratio_is_met_only_when_its_whole_range_meets_the_target() -> None:
    interval = ratio_interval({"knees": [900.0, 1200.0]}, {"knees": [250.0, 300.0]})
    assert (interval["low"], interval["median"], interval["high"]) == (3.0, 3.82, 4.8)
    assert meets(interval, ">=", 3.0) is True
    assert meets(interval, ">=", 3.5) is False      # crosses: not met
    assert meets(ratio_interval(None, {"knees": [1.0]}), ">=", 1.0) is None
    assert meets({"low": 1.0, "high": 2.0}, "<=", 2.0) is True
