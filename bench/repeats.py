"""Knees over repeated sweeps, and ratios with an interval. Pure.

One sweep's knee can be set by one transient spike, so the `client` and `stream` scenarios (and the
unbatched text baseline they are compared with) run `Plan.repeats` whole sweeps in one invocation.
Each knee is reported with its median and range over those runs, and a ratio with the range
[min(a)/max(b), max(a)/min(b)]: a target counts as met only when the whole range meets it (a range
crossing the target is reported as not met), as the issue asks.

Example::

    >>> knee_interval([{"knee_goodput_rps": 300.0}, {"knee_goodput_rps": 270.0}, {"knee_goodput_rps": 310.0}])
    {'knees': [300.0, 270.0, 310.0], 'median': 300.0, 'low': 270.0, 'high': 310.0, 'runs': 3}
    >>> interval = ratio_interval({"knees": [900.0, 1000.0]}, {"knees": [280.0, 300.0]})
    >>> interval["median"], interval["low"], interval["high"]
    (3.28, 3.0, 3.57)
    >>> meets(interval, ">=", 3.0), meets(interval, ">=", 3.2)
    (True, False)
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping, Sequence


def knee_interval(sweeps: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The knees (goodput at the SLO) of repeated sweeps: each, the median, the range, the count.
    A sweep that found no passing rate counts as a knee of 0."""
    knees = [float(s.get("knee_goodput_rps") or 0.0) for s in sweeps]
    return {"knees": knees, "median": round(statistics.median(knees), 2) if knees else None,
            "low": min(knees, default=None), "high": max(knees, default=None), "runs": len(knees)}


def ratio_interval(numerator: Mapping[str, Any] | None, denominator: Mapping[str, Any] | None) -> dict[str, Any]:
    """median(a)/median(b) and the range [min(a)/max(b), max(a)/min(b)] of two knee intervals."""
    a = [k for k in (numerator or {}).get("knees", [])]
    b = [k for k in (denominator or {}).get("knees", []) if k > 0]
    if not a or not b:
        return {"median": None, "low": None, "high": None}
    return {"median": round(statistics.median(a) / statistics.median(b), 2), "low": round(min(a) / max(b), 2),
            "high": round(max(a) / min(b), 2)}


def meets(interval: Mapping[str, Any], op: str, bound: float) -> bool | None:
    """Whether the whole interval meets `op bound` (None when not measured)."""
    low, high = interval.get("low"), interval.get("high")
    if low is None or high is None:
        return None
    return bool(low >= bound) if op == ">=" else bool(high <= bound)


__all__ = ["knee_interval", "meets", "ratio_interval"]
