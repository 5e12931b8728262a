"""Online model of how long a batch takes: duration ≈ a·n + b, fitted by least squares over the most
recent batches (BentoML's dispatcher idea, as a pure class). Used to pick batch sizes that still meet
every item's deadline and to estimate queue waits for early shedding.

Example::

    cost = BatchCost()
    cost.observe(1, 0.012); cost.observe(8, 0.030)
    cost.predict(4)          # ≈ 0.0197 s
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

#: Batches remembered for the fit; old behaviour (e.g. before a model swap) ages out.
DEFAULT_WINDOW = 64
#: Below this many samples, or with a single batch size seen, fall back to the mean per-item time.
MIN_SAMPLES_FOR_FIT = 4


@dataclass(frozen=True)
class CostEstimate:
    per_item_s: float
    fixed_s: float

    def predict(self, n: int) -> float:
        return self.fixed_s + self.per_item_s * n


class BatchCost:
    """Least-squares fit of batch duration against batch size over a bounded window."""

    def __init__(self, window: int = DEFAULT_WINDOW) -> None:
        if window < MIN_SAMPLES_FOR_FIT:
            raise ValueError(f"window must be >= {MIN_SAMPLES_FOR_FIT}, got {window}")
        self._samples: deque[tuple[int, float]] = deque(maxlen=window)
        self._fit: CostEstimate | None = None  # cached until the next observation (read per submit)

    @property
    def samples(self) -> int:
        return len(self._samples)

    def observe(self, batch_size: int, duration_s: float) -> None:
        """Record one finished batch."""
        if batch_size >= 1 and duration_s >= 0:
            self._samples.append((batch_size, duration_s))
            self._fit = None

    def estimate(self) -> CostEstimate | None:
        """The current fit, or None before any batch has been observed."""
        if self._fit is None and self._samples:
            self._fit = self._least_squares()
        return self._fit

    def _least_squares(self) -> CostEstimate:
        sizes = [n for n, _ in self._samples]
        durations = [d for _, d in self._samples]
        count = len(sizes)
        mean_n, mean_d = sum(sizes) / count, sum(durations) / count
        spread = sum((n - mean_n) ** 2 for n in sizes)
        if count < MIN_SAMPLES_FOR_FIT or spread == 0:
            return CostEstimate(0.0, mean_d) if spread == 0 else CostEstimate(mean_d / mean_n, 0.0)
        slope = sum((n - mean_n) * (d - mean_d) for n, d in self._samples) / spread
        slope = max(slope, 0.0)
        intercept = max(mean_d - slope * mean_n, 0.0)
        return CostEstimate(slope, intercept)

    def predict(self, n: int) -> float:
        """Predicted duration of a batch of `n` (0.0 before any observation)."""
        estimate = self.estimate()
        return estimate.predict(n) if estimate else 0.0
