"""What the mesh benchmark runs: traffic mixes, tenants, SLOs, and the full and quick plans.

* Mixes (share of requests by item kind): `text` (chat lines), `image` (a picture with text in it:
  vision + OCR + OCR lines through text), `mixed` (90 % text, 10 % image).
* Tenants: `chat` (realtime), `forum` (standard), `rescan` (bulk) send every mix, 30/50/20 % of it.
  The isolation scenario uses `chat` as the realtime tenant and `rescan` as the bulk flood.
* SLO: P99 per item kind (text 50 ms, image 1000 ms by default). A step meets it when every kind's
  P99, measured from the scheduled send time, is within its SLO and at least 99 % of calls are OK.

Example::

    plan = Plan.quick()
    MIXES["text"].kinds        # {"text": 1.0}
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping

from bench.direct import DirectPlan
from bench.tenants import BenchTenant

REALTIME = BenchTenant("chat", "realtime", 0.3)
STANDARD = BenchTenant("forum", "standard", 0.5)
BULK = BenchTenant("rescan", "bulk", 0.2)
TENANTS = (REALTIME, STANDARD, BULK)


@dataclass(frozen=True)
class Mix:
    """A traffic mix and where its knee search starts (requests/s)."""

    name: str
    kinds: Mapping[str, float]
    start_rps: float
    max_rps: float


MIXES: Mapping[str, Mix] = {
    "text": Mix("text", {"text": 1.0}, 200.0, 20000.0),
    "image": Mix("image", {"image": 1.0}, 2.0, 500.0),
    "mixed": Mix("mixed", {"text": 0.9, "image": 0.1}, 20.0, 5000.0),
}


@dataclass(frozen=True)
class Slo:
    """P99 targets per item kind, and the deadline each call carries (so an overloaded step ends)."""

    p99_ms: Mapping[str, float] = field(default_factory=lambda: {"text": 50.0, "image": 1000.0})
    deadline_ms: Mapping[str, float] = field(default_factory=lambda: {"text": 500.0, "image": 4000.0})
    min_success: float = 0.99

    def __post_init__(self) -> None:
        for kind, value in {**self.p99_ms, **self.deadline_ms}.items():
            if value <= 0:
                raise ValueError(f"SLO and deadline values must be > 0, got {kind}={value}")
        if not 0 < self.min_success <= 1:
            raise ValueError(f"min_success must be in (0, 1], got {self.min_success}")

    def deadlines_s(self) -> dict[str, float]:
        return {kind: ms / 1000.0 for kind, ms in self.deadline_ms.items()}


@dataclass(frozen=True)
class Plan:
    """How long and how finely to run. `full()` takes a few minutes, `quick()` well under a minute."""

    mixes: tuple[str, ...]
    step_s: float                 # offered load per step, seconds (longer for very low rates, see min_requests)
    min_requests: int             # a step lasts long enough for this many requests ...
    max_step_s: float             # ... but no longer than this
    growth: float                 # knee search: rate x growth while steps pass
    precision: float              # knee search: stop bisecting when high / low <= this
    max_steps: int                # knee search: steps per mix at most
    start_scale: float            # multiplies each mix's start_rps
    isolation_s: float            # each isolation phase (alone, with flood)
    realtime_share: float         # isolation: realtime rate as a share of the measured capacity
    realtime_min_rps: float
    flood_factor: float           # isolation: bulk offers this x the measured capacity
    lowload_requests: int         # low-load scenario: requests at 1/s
    direct: DirectPlan
    seed: int = 0                 # step i of every knee search draws its arrivals with seed + i
    capacity_rps: float = 0.0     # isolation: use this text capacity instead of measuring it (0 = measure)
    flood_nice: int = 0           # isolation: CPU niceness of the flood generator (emulates a client on other hosts)
    repeats: int = 1              # knee search: runs of each rate at the bracket, decided by majority (bench/knee.py)

    @classmethod
    def full(cls) -> Plan:
        return cls(mixes=("text", "image", "mixed"), step_s=4.0, min_requests=20, max_step_s=12.0, growth=1.5, precision=1.12,
                   max_steps=18, start_scale=1.0, isolation_s=8.0, realtime_share=0.1, realtime_min_rps=5.0,
                   flood_factor=5.0, lowload_requests=30, direct=DirectPlan.full(), repeats=3)

    @classmethod
    def quick(cls) -> Plan:
        return cls(mixes=("text", "mixed"), step_s=0.6, min_requests=3, max_step_s=2.0, growth=3.0, precision=4.0, max_steps=2,
                   start_scale=0.5, isolation_s=1.0, realtime_share=0.1, realtime_min_rps=5.0, flood_factor=5.0,
                   lowload_requests=3, direct=DirectPlan.quick(),
                   # Steps this short hold a handful of requests: this seed puts images in every
                   # step the quick mixed search can take (10/s, then 30/s or 3.3/s).
                   seed=8)

    def with_mixes(self, mixes: tuple[str, ...]) -> Plan:
        """The same plan over other mixes; raises ValueError for an unknown mix name."""
        unknown = [m for m in mixes if m not in MIXES]
        if unknown:
            raise ValueError(f"unknown mix {unknown[0]!r}; known: {sorted(MIXES)}")
        return replace(self, mixes=mixes)

    def step_duration_s(self, rate_rps: float) -> float:
        """The step length at `rate_rps`: `step_s`, stretched (up to `max_step_s`) so that at least
        `min_requests` are expected."""
        return max(self.step_s, min(self.max_step_s, self.min_requests / rate_rps))
