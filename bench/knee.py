"""Finding the knee: the highest offered rate whose step still meets the SLO. Pure, no I/O.

Steps grow geometrically from `start_rps` (x `growth`) while they pass; after the first failure the
search bisects (geometric mean) between the highest passing rate and the lowest failing rate above
it, until they are within `precision` of each other. If the very first step fails, rates go down
instead, until one passes or `min_rps` is reached. `max_steps` bounds the whole search.

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
    tried: list[float] = field(default_factory=list)
    _passed: list[float] = field(default_factory=list)
    _failed: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.start_rps <= 0 or self.min_rps <= 0:
            raise ValueError(f"start_rps and min_rps must be > 0, got {self.start_rps} and {self.min_rps}")
        if self.growth <= 1 or self.precision <= 1:
            raise ValueError(f"growth and precision must be > 1, got {self.growth} and {self.precision}")
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")

    @property
    def knee(self) -> float | None:
        """The highest passing rate so far, or None if no step passed."""
        return max(self._passed, default=None)

    def record(self, rate_rps: float, *, passed: bool) -> None:
        """Note the outcome of a step run at `rate_rps`."""
        self.tried.append(rate_rps)
        (self._passed if passed else self._failed).append(rate_rps)

    def next_rate(self) -> float | None:
        """The next rate to try, or None when the knee is found closely enough (or steps ran out)."""
        if len(self.tried) >= self.max_steps:
            return None
        if not self.tried:
            return round(float(min(self.start_rps, self.max_rps)), 2)
        low = self.knee
        if low is None:
            rate = min(self._failed) / self.growth
            return round(rate, 2) if rate >= self.min_rps else None
        above = [rate for rate in self._failed if rate > low]
        if not above:
            rate = min(low * self.growth, self.max_rps)
            return round(rate, 2) if rate > low else None
        high = min(above)
        if high / low <= self.precision:
            return None
        return round(math.sqrt(low * high), 2)
