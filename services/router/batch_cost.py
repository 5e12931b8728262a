"""Online model of how long a batch takes: duration ≈ a·n + b, fitted by weighted least squares over
the most recent batches (BentoML's dispatcher idea, as a pure class). Used to pick batch sizes that
still meet every item's deadline and to estimate queue waits for early shedding.

An estimate that sheds work must be warm and honest (issue 15: a freshly started mesh shed images
it could serve, on a cold, stale fit):

- seeded: `seed(items, seconds)` gives a prior before any batch is seen, from the model's own warm
  run (the modality service reports it in ModelConfig's `warmup` parameter); the prior counts as one
  observation of `items` items at `seconds / items` each, so real batches outweigh it at once;
- decayed: an observation's weight halves every `half_life_s` seconds, so a burst minutes ago (or
  the first slow calls of a cold connection) no longer says what a batch costs now; with every
  observation faded the estimate falls back to the prior.
- the prior alone never sheds at batch time (`observed` is False; see `services.router.scheduler`): a
  warm run timed while the host was still starting other services once said 2.9 s for an image that
  takes 0.3 s, and a router that sheds every image on that prior never runs a batch to learn otherwise.

Example::

    cost = BatchCost()
    cost.observe(1, 0.012); cost.observe(8, 0.030)
    cost.predict(4)          # ≈ 0.0197 s
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

#: Batches remembered for the fit; old behaviour (e.g. before a model swap) ages out.
DEFAULT_WINDOW = 64
#: Below this much (decayed) weight of observations, or with a single batch size seen, fall back to
#: the mean per-item time.
MIN_SAMPLES_FOR_FIT = 4
#: An observation's weight halves this often (seconds).
DEFAULT_HALF_LIFE_S = 15.0
#: Observations weighing less than this (about 7 half-lives) are dropped.
MIN_WEIGHT = 0.01
#: A cached fit is recomputed after this long even without a new observation (weights change with age).
REFIT_AFTER_S = 1.0


@dataclass(frozen=True)
class CostEstimate:
    per_item_s: float
    fixed_s: float

    def predict(self, n: int) -> float:
        return self.fixed_s + self.per_item_s * n


class BatchCost:
    """Weighted least-squares fit of batch duration against batch size over a bounded, decaying window."""

    def __init__(self, window: int = DEFAULT_WINDOW, *, half_life_s: float = DEFAULT_HALF_LIFE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if window < MIN_SAMPLES_FOR_FIT:
            raise ValueError(f"window must be >= {MIN_SAMPLES_FOR_FIT}, got {window}")
        if half_life_s <= 0:
            raise ValueError(f"half_life_s must be > 0, got {half_life_s}")
        self._samples: deque[tuple[int, float, float]] = deque(maxlen=window)  # (size, seconds, when)
        self._half_life_s = half_life_s
        self._clock = clock
        self._prior: tuple[int, float] | None = None
        self._fit: CostEstimate | None = None  # cached (read per submit) until an observation or REFIT_AFTER_S
        self._fit_at = 0.0

    @property
    def samples(self) -> int:
        return len(self._samples)

    @property
    def seeded(self) -> bool:
        return self._prior is not None

    @property
    def observed(self) -> bool:
        """True while a finished batch still weighs in the fit (not the prior alone)."""
        now = self._clock()
        return any(self._weight(when, now) >= MIN_WEIGHT for _, _, when in self._samples)

    def seed(self, items: int, duration_s: float) -> None:
        """The prior: `items` items took `duration_s` on a warm model (one observation's worth)."""
        if items >= 1 and duration_s > 0:
            self._prior = (items, duration_s)
            self._fit = None

    def observe(self, batch_size: int, duration_s: float) -> None:
        """Record one finished batch."""
        if batch_size >= 1 and duration_s >= 0:
            self._samples.append((batch_size, duration_s, self._clock()))
            self._fit = None

    def estimate(self) -> CostEstimate | None:
        """The current fit, or None with no prior and no observation."""
        now = self._clock()
        if self._fit is None or now - self._fit_at > REFIT_AFTER_S:
            self._fit, self._fit_at = self._weighted_fit(now), now
        return self._fit

    def _weighted(self, now: float) -> list[tuple[float, float, float]]:
        """(size, seconds, weight) of the observations still worth counting, the prior last."""
        while self._samples and self._weight(self._samples[0][2], now) < MIN_WEIGHT:
            self._samples.popleft()
        points = [(float(n), d, self._weight(when, now)) for n, d, when in self._samples]
        if self._prior is not None:
            items, seconds = self._prior
            points += [(1.0, seconds / items, 0.5), (float(items), seconds, 0.5)]  # through 0: a per-item prior
        return points

    def _weight(self, when: float, now: float) -> float:
        return float(0.5 ** (max(now - when, 0.0) / self._half_life_s))

    def _weighted_fit(self, now: float) -> CostEstimate | None:
        points = self._weighted(now)
        total = sum(w for _, _, w in points)
        if not points or total <= 0:
            return None
        mean_n = sum(n * w for n, _, w in points) / total
        mean_d = sum(d * w for _, d, w in points) / total
        spread = sum(w * (n - mean_n) ** 2 for n, _, w in points)
        if total < MIN_SAMPLES_FOR_FIT - 1e-9 or spread <= 1e-12:
            return CostEstimate(0.0, mean_d) if spread <= 1e-12 else CostEstimate(mean_d / mean_n, 0.0)
        slope = max(sum(w * (n - mean_n) * (d - mean_d) for n, d, w in points) / spread, 0.0)
        intercept = max(mean_d - slope * mean_n, 0.0)
        return CostEstimate(slope, intercept)

    def predict(self, n: int) -> float:
        """Predicted duration of a batch of `n` (0.0 with no prior and no observation)."""
        estimate = self.estimate()
        return estimate.predict(n) if estimate else 0.0
