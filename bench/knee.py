"""Finding the knee: the highest offered rate whose step still meets the SLO. Pure, no I/O.

Steps grow geometrically from `start_rps` (x `growth`) while they pass; after the first failure the
search bisects (geometric mean) between the highest passing rate and the lowest failing rate above
it, until they are within `precision` of each other. If the very first step fails, rates go down
instead, until one passes or `min_rps` is reached. `max_steps` bounds the whole search.

One short step is a noisy sample: a single transient P99 spike once decided a whole knee (1121/s in
one quiet run, 271/s in the next; issue 15). So with `repeats` > 1 the two rates that bracket the
knee are each run up to `repeats` times and decided by majority (2 of 3: a rate stops repeating as
soon as a majority agrees), and a bracket that a repeat overturns moves on. Far from the knee one
run decides (a step at half the capacity does not fail by chance often enough to matter, and the
bracket's repeats would catch it).

`interval` says how sure the knee is over the repeated runs: from the highest rate that passed
every run it had (with every run below it passing too) to the lowest rate that failed every run
(or, without one, the lowest rate a majority failed). The true knee, the rate where a step passes
half the time, lies in between.

Example::

    >>> search = KneeSearch(start_rps=100, growth=2.0, precision=1.3, max_steps=10)
    >>> rate = search.next_rate()
    >>> while rate is not None:
    ...     search.record(rate, passed=rate <= 500)
    ...     rate = search.next_rate()
    >>> search.tried, search.knee
    ([100.0, 200.0, 400.0, 800.0, 565.69, 475.68], 475.68)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class KneeSearch:
    """Proposes the next offered rate from the results so far (see the module docstring)."""

    start_rps: float
    growth: float = 1.5
    precision: float = 1.1
    max_steps: int = 12
    max_rps: float = 1e6
    min_rps: float = 0.1
    #: Runs per rate at the bracket (decided by majority); 1 = every rate is run once.
    repeats: int = 1
    tried: list[float] = field(default_factory=list)
    _runs: dict[float, list[bool]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.start_rps <= 0 or self.min_rps <= 0:
            raise ValueError(f"start_rps and min_rps must be > 0, got {self.start_rps} and {self.min_rps}")
        if self.growth <= 1 or self.precision <= 1:
            raise ValueError(f"growth and precision must be > 1, got {self.growth} and {self.precision}")
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        if self.repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {self.repeats}")

    @property
    def runs(self) -> dict[float, list[bool]]:
        """Rate -> the outcome of each of its runs (True = passed), in order."""
        return {rate: list(outcomes) for rate, outcomes in self._runs.items()}

    def passed(self, rate: float) -> bool:
        """The rate's verdict so far: a majority of its runs passed (a tie counts as failed)."""
        outcomes = self._runs[rate]
        return 2 * sum(outcomes) > len(outcomes)

    def _settled(self, rate: float) -> bool:
        outcomes, need = self._runs[rate], self.repeats // 2 + 1
        return self.repeats == 1 or sum(outcomes) >= need or len(outcomes) - sum(outcomes) >= need \
            or len(outcomes) >= self.repeats

    @property
    def knee(self) -> float | None:
        """The highest rate a majority of whose runs passed, or None if none did."""
        return max((rate for rate in self._runs if self.passed(rate)), default=None)

    def _failed_above(self, low: float | None) -> list[float]:
        return [rate for rate in self._runs if not self.passed(rate) and (low is None or rate > low)]

    @property
    def interval(self) -> tuple[float, float | None] | None:
        """(low, high) around the knee over the repeated runs (see the module docstring); high is None
        when no rate above the knee failed. None without a knee."""
        knee = self.knee
        if knee is None:
            return None
        low = 0.0
        for rate in sorted(self._runs):
            if rate > knee or not all(self._runs[rate]):
                break
            low = rate
        unanimous = [rate for rate, outcomes in self._runs.items() if rate > knee and not any(outcomes)]
        above = self._failed_above(knee)
        high = min(unanimous) if unanimous else min(above, default=None)
        return (low, high)

    def record(self, rate_rps: float, *, passed: bool) -> None:
        """Note the outcome of a step run at `rate_rps`."""
        self.tried.append(rate_rps)
        self._runs.setdefault(rate_rps, []).append(passed)

    def next_rate(self) -> float | None:
        """The next rate to try, or None when the knee is found closely enough (or steps ran out)."""
        if len(self.tried) >= self.max_steps:
            return None
        if not self.tried:
            return round(float(min(self.start_rps, self.max_rps)), 2)
        low = self.knee
        above = self._failed_above(low)
        if low is None:
            lowest = min(above)
            if not self._settled(lowest):
                return lowest
            rate = lowest / self.growth
            return round(rate, 2) if rate >= self.min_rps else None
        if not above:
            rate = min(low * self.growth, self.max_rps)
            if rate <= low:  # at max_rps: make sure of the top rate, then stop
                return low if not self._settled(low) else None
            return round(rate, 2)
        high = min(above)
        for rate in (low, high):  # the bracket: repeat until a majority decides each end
            if not self._settled(rate):
                return rate
        if high / low <= self.precision:
            return None
        return round(math.sqrt(low * high), 2)
