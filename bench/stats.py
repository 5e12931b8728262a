"""Latency summaries for the benchmarks: percentiles, status counts, rates. Pure functions.

Percentiles use the nearest-rank method on the sorted samples (no interpolation), so a P99 over 100
samples is the 99th smallest: a reader can check any number against the raw samples.

Example::

    >>> summarize_ms([0.001, 0.002, 0.003, 0.010])
    {'n': 4, 'p50_ms': 2.0, 'p95_ms': 10.0, 'p99_ms': 10.0, 'max_ms': 10.0, 'mean_ms': 4.0}
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Iterable, Sequence

LatencySummary = dict[str, float]


def percentile(sorted_samples: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted samples; `fraction` in [0, 1].

    Raises ValueError for an empty sequence or a fraction outside [0, 1].

    Example::

        >>> percentile([1.0, 2.0, 3.0, 4.0], 0.5)
        2.0
    """
    if not sorted_samples:
        raise ValueError("percentile of no samples")
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1], got {fraction}")
    rank = max(1, math.ceil(fraction * len(sorted_samples)))
    return sorted_samples[rank - 1]


def summarize_ms(samples_s: Iterable[float]) -> LatencySummary:
    """P50/P95/P99/max/mean in milliseconds (rounded to 0.01 ms) of samples given in seconds.

    An empty input gives {"n": 0}: a step where nothing completed has no latency to report.
    """
    ordered = sorted(samples_s)
    if not ordered:
        return {"n": 0}
    ms = [value * 1000.0 for value in ordered]
    return {"n": len(ms), "p50_ms": round(percentile(ms, 0.50), 2), "p95_ms": round(percentile(ms, 0.95), 2),
            "p99_ms": round(percentile(ms, 0.99), 2), "max_ms": round(ms[-1], 2),
            "mean_ms": round(sum(ms) / len(ms), 2)}


def status_counts(codes: Iterable[str]) -> dict[str, int]:
    """How many calls ended with each gRPC status name, most frequent first.

    Example::

        >>> status_counts(["OK", "OK", "DEADLINE_EXCEEDED"])
        {'OK': 2, 'DEADLINE_EXCEEDED': 1}
    """
    return dict(Counter(codes).most_common())


def ratio(numerator: float | None, denominator: float | None, digits: int = 3) -> float | None:
    """numerator / denominator rounded, or None when either is missing or the denominator is 0."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return round(numerator / denominator, digits)
