"""Gray release of a policy version: which items go to the candidate, how each arm behaves, where a
shadowed candidate disagrees with the baseline, and when to roll the candidate back. Pure; the clock
is passed in.

* Assignment is a stable hash of the item id (`in_canary`): the same item always takes the same arm,
  on every router replica, so a user who retries sees the same answer.
* `CanaryMonitor` counts items, blocks and errors per arm over a sliding window (`RollbackBounds.window_s`,
  kept in a dozen time buckets so memory does not grow with traffic) and says when the candidate
  departs from the baseline beyond the bounds.
* In shadow mode both policies judge the same items; `record_shadow` counts disagreements per
  category and keeps the latest example item ids. A disagreement budget
  (`RollbackBounds.max_decision_disagreement_rate`, off at 1.0) ends a shadow canary whose candidate
  decides differently on more than that share of at least `min_samples` items (e.g. a tenant
  classifier that flags everything).

Example::

    monitor = CanaryMonitor(RollbackBounds(max_block_rate_delta=0.1, min_samples=50))
    monitor.record("candidate", blocked=True, error=False, now=clock())
    monitor.breach(clock())   # "candidate block rate 0.62 vs baseline 0.05 (bound ±0.10)" or None
"""

from __future__ import annotations

import collections
import hashlib
import time
from dataclasses import dataclass, field
from typing import Literal, Mapping

Arm = Literal["baseline", "candidate"]
ARMS: tuple[Arm, ...] = ("baseline", "candidate")
#: Time buckets per window: the window slides in steps of window_s / WINDOW_BUCKETS.
WINDOW_BUCKETS = 12
#: Example item ids kept per category (the most recent ones).
MAX_EXAMPLES = 10
#: The canary clock: wall time, so that every replica's buckets have the same numbers (fleet counts).
CANARY_CLOCK = time.time


@dataclass(frozen=True)
class RollbackBounds:
    """When a candidate is rolled back automatically (see the module docstring)."""

    max_block_rate_delta: float = 0.10
    max_error_rate_delta: float = 0.05
    min_samples: int = 50
    window_s: float = 60.0
    #: Shadow mode: the share of items on which the candidate may decide differently (1.0 = no bound).
    max_decision_disagreement_rate: float = 1.0

    def __post_init__(self) -> None:
        for name in ("max_block_rate_delta", "max_error_rate_delta", "max_decision_disagreement_rate"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {value}")
        if self.min_samples < 1:
            raise ValueError(f"min_samples must be >= 1, got {self.min_samples}")
        if self.window_s <= 0:
            raise ValueError(f"window_s must be > 0, got {self.window_s}")


def canary_fraction(key: str) -> float:
    """A stable number in [0, 1) for `key` (SHA-256, so it is the same on every replica and platform)."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") / 2.0 ** 64


def in_canary(key: str, percent: float) -> bool:
    """True when the item keyed `key` belongs to the `percent` % share of traffic sent to the candidate."""
    return canary_fraction(key) * 100.0 < percent


@dataclass
class ArmCounts:
    items: int = 0
    blocked: int = 0
    errors: int = 0

    @property
    def block_rate(self) -> float:
        return self.blocked / self.items if self.items else 0.0

    @property
    def error_rate(self) -> float:
        return self.errors / self.items if self.items else 0.0

    def add(self, other: ArmCounts) -> None:
        self.items += other.items
        self.blocked += other.blocked
        self.errors += other.errors


@dataclass
class Disagreements:
    """Shadow mode: how often, and on which items, the candidate decided differently."""

    items: int = 0
    decisions: int = 0
    per_category: dict[str, int] = field(default_factory=dict)
    examples: dict[str, collections.deque[str]] = field(default_factory=dict)


@dataclass
class FleetCounts:
    """Counts of a canary per time bucket and arm, and shadow items and decision disagreements: one
    replica's own (what it shares) or the other replicas' together (what it reads back)."""

    buckets: dict[int, dict[Arm, ArmCounts]] = field(default_factory=dict)
    shadow_items: int = 0
    shadow_decisions: int = 0

    def add(self, other: FleetCounts) -> None:
        for bucket, arms in other.buckets.items():
            mine = self.buckets.setdefault(bucket, {a: ArmCounts() for a in ARMS})
            for arm in ARMS:
                mine[arm].add(arms[arm])
        self.shadow_items += other.shadow_items
        self.shadow_decisions += other.shadow_decisions


@dataclass(frozen=True)
class CanaryReport:
    baseline: ArmCounts
    candidate: ArmCounts
    shadow: Disagreements


class CanaryMonitor:
    """Counts for one running canary (see the module docstring). Not thread-safe: use from one loop."""

    def __init__(self, bounds: RollbackBounds) -> None:
        self.bounds = bounds
        self._bucket_s = bounds.window_s / WINDOW_BUCKETS
        self._buckets: dict[int, dict[Arm, ArmCounts]] = {}
        self.shadow = Disagreements()
        #: Set once the bounds were exceeded: the canary is over, whatever the store says yet.
        self.rolled_back = ""
        # The other replicas' counts as last read (services/router/canary_fleet.py), valid until `_others_until`.
        self._others: FleetCounts | None = None
        self._others_until = 0.0

    @property
    def bucket_s(self) -> float:
        """The length of one time bucket (`window_s / WINDOW_BUCKETS`)."""
        return self._bucket_s

    def bucket(self, now: float) -> int:
        """The number of the bucket `now` falls in."""
        return int(now // self._bucket_s)

    def record(self, arm: Arm, *, blocked: bool, error: bool, now: float) -> None:
        """One item answered (or failed) in `arm`."""
        self._buckets.setdefault(self.bucket(now), {a: ArmCounts() for a in ARMS})[arm].add(ArmCounts(1, int(blocked), int(error)))
        self._expire(now)

    def own_counts(self, now: float) -> FleetCounts:
        """This replica's counts in the window ending at `now` (cumulative per bucket), and its shadow
        counts: what it shares with the other replicas (a copy; sharing it twice changes nothing)."""
        oldest = self.bucket(now) - WINDOW_BUCKETS + 1
        buckets = {number: {arm: ArmCounts(c.items, c.blocked, c.errors) for arm, c in arms.items()}
                   for number, arms in list(self._buckets.items()) if number >= oldest}
        return FleetCounts(buckets, self.shadow.items, self.shadow.decisions)

    def set_others(self, others: FleetCounts, *, now: float, valid_for_s: float) -> None:
        """The other replicas' counts as read at `now`: the rollback judgment adds them to this replica's
        own until `now + valid_for_s` (afterwards, without a newer read, it judges its own alone)."""
        self._others = others
        self._others_until = now + valid_for_s

    def record_shadow(self, item_id: str, baseline: Mapping[str, str], candidate: Mapping[str, str],
                      decisions: tuple[str, str]) -> None:
        """One item judged by both: per-category actions of each, and (baseline, candidate) decisions."""
        shadow = self.shadow
        shadow.items += 1
        shadow.decisions += decisions[0] != decisions[1]
        for category in sorted(set(baseline) | set(candidate)):
            if baseline.get(category, "allow") != candidate.get(category, "allow"):
                shadow.per_category[category] = shadow.per_category.get(category, 0) + 1
                shadow.examples.setdefault(category, collections.deque(maxlen=MAX_EXAMPLES)).append(item_id)

    def counts(self, arm: Arm, now: float, *, fleet: bool = False) -> ArmCounts:
        """Items, blocks and errors of `arm` in the window ending at `now`: this replica's, or with `fleet`
        also the other replicas' as last read (while fresh). Reads only (safe from a metrics thread)."""
        others = self._others if fleet and self.others_fresh(now) else None
        sources = [self._buckets, others.buckets] if others is not None else [self._buckets]
        oldest = self.bucket(now) - WINDOW_BUCKETS + 1
        total = ArmCounts()
        for buckets in sources:
            for number, bucket in list(buckets.items()):
                if number >= oldest:
                    total.add(bucket[arm])
        return total

    def others_fresh(self, now: float) -> bool:
        """True while the other replicas' counts last read are valid."""
        return self._others is not None and now < self._others_until

    def _shadow_totals(self, now: float) -> tuple[int, int]:
        if self._others is not None and self.others_fresh(now):
            return self.shadow.items + self._others.shadow_items, self.shadow.decisions + self._others.shadow_decisions
        return self.shadow.items, self.shadow.decisions

    def breach(self, now: float) -> str | None:
        """Why the candidate should be rolled back now, or None while it stays within the bounds. Judged
        on this replica's counts plus the other replicas' when those are fresh (services/router/canary_fleet.py)."""
        base, cand = self.counts("baseline", now, fleet=True), self.counts("candidate", now, fleet=True)
        bounds = self.bounds
        items, decisions = self._shadow_totals(now)
        if items >= bounds.min_samples and decisions / items > bounds.max_decision_disagreement_rate:
            return (f"shadow candidate decided differently on {decisions / items:.2f} of {items} "
                    f"items (bound {bounds.max_decision_disagreement_rate:.2f})")
        if base.items < bounds.min_samples or cand.items < bounds.min_samples:
            return None
        if abs(cand.block_rate - base.block_rate) > bounds.max_block_rate_delta:
            return (f"candidate block rate {cand.block_rate:.2f} vs baseline {base.block_rate:.2f} "
                    f"(bound ±{bounds.max_block_rate_delta:.2f}, {cand.items}/{base.items} items)")
        if cand.error_rate - base.error_rate > bounds.max_error_rate_delta:
            return (f"candidate error rate {cand.error_rate:.2f} vs baseline {base.error_rate:.2f} "
                    f"(bound +{bounds.max_error_rate_delta:.2f}, {cand.items}/{base.items} items)")
        return None

    def report(self, now: float, *, fleet: bool = False) -> CanaryReport:
        """The window's counts (this replica's, or with `fleet` the fleet's: see `counts`) and this replica's
        shadow disagreements."""
        return CanaryReport(self.counts("baseline", now, fleet=fleet), self.counts("candidate", now, fleet=fleet),
                            self.shadow)

    def _expire(self, now: float) -> None:
        oldest = self.bucket(now) - WINDOW_BUCKETS + 1
        for key in [key for key in self._buckets if key < oldest]:
            del self._buckets[key]
