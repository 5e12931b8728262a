"""Percentiles (nearest rank), summaries in ms, status counts, ratios."""

from __future__ import annotations

import pytest

from bench.stats import percentile, ratio, status_counts, summarize_ms


def test_nearest_rank_percentiles() -> None:
    samples = [float(i) for i in range(1, 101)]
    assert (percentile(samples, 0.5), percentile(samples, 0.99), percentile(samples, 1.0)) == (50.0, 99.0, 100.0)
    assert percentile([7.0], 0.0) == 7.0


def test_percentile_rejects_no_samples_and_bad_fractions() -> None:
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 0.5)
    with pytest.raises(ValueError, match="fraction"):
        percentile([1.0], 1.5)


def test_summary_is_in_milliseconds_and_ordered() -> None:
    summary = summarize_ms([0.004, 0.001, 0.002, 0.003])
    assert summary == {"n": 4, "p50_ms": 2.0, "p95_ms": 4.0, "p99_ms": 4.0, "max_ms": 4.0, "mean_ms": 2.5}
    assert summarize_ms([]) == {"n": 0}


def test_status_counts_and_ratio() -> None:
    assert status_counts(["OK", "UNAVAILABLE", "OK"]) == {"OK": 2, "UNAVAILABLE": 1}
    assert ratio(3.0, 4.0) == 0.75 and ratio(None, 1.0) is None and ratio(1.0, 0.0) is None
