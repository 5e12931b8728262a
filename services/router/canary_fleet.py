"""Canary counts shared by every router replica, in the Redis of `redis.url`, so that a canary's
automatic rollback judges the whole fleet's traffic, not one replica's share of it.

Each replica keeps counting locally (services/router/control/canary.py: items, blocks, errors per arm
in time buckets of `window_s / 12` on the wall clock, and shadow disagreements). Every second (`sync`)
it writes its own counts of the window, as totals per bucket (`HSET <bucket> <replica>|<arm>|<field>
<total>`: writing them again changes nothing, so a retried or repeated sync never counts twice), and
reads back every replica's fields of the window's buckets. The judgment (`CanaryMonitor.breach`) adds
the other replicas' counts, as last read, to its own live ones; once that read is older than
`stale_after_s` (Redis unreachable) the replica judges its own traffic alone. A replica that finds the
bounds exceeded rolls the canary back; the store's conditional stop (`PolicyControl.stop_canary`)
makes that land once, whichever replica is first.

Keys: `<redis.key_prefix>:canary:{<policy>|<scope>|<candidate>|<started_at>}:b<bucket>` (per bucket,
expiring two windows after the last write) and `...:shadow` (shadow counts, kept a day); `<replica>`
is a random id per router process.

Example::

    fleet = CanaryFleet(connect(RedisConfig(url=...), timeout_s=1.0), "auditmesh:canary")
    await fleet.sync(spec, monitor)       # then monitor.breach(now) judges the fleet's counts
"""

from __future__ import annotations

import logging
import math
import uuid
from typing import Any

from services.router.control.canary import ARMS, CANARY_CLOCK, WINDOW_BUCKETS, Arm, ArmCounts, CanaryMonitor, FleetCounts
from services.router.control.store import CanarySpec

log = logging.getLogger(__name__)
#: How long the shadow counts of a canary are kept after their last change.
SHADOW_TTL_S = 86400
_FIELDS = ("items", "blocked", "errors")


class CanaryFleet:
    """See the module docstring. Use from the event loop (the monitors are not thread-safe)."""

    def __init__(self, client: Any, prefix: str, *, replica: str = "", stale_after_s: float = 5.0) -> None:
        self._client = client
        self._prefix = prefix
        self.replica = replica or uuid.uuid4().hex[:16]
        self.stale_after_s = stale_after_s

    def key(self, spec: CanarySpec) -> str:
        """The prefix of one canary's keys (its identity in braces: one Redis Cluster slot)."""
        return f"{self._prefix}:{{{spec.policy}|{spec.scope}|{spec.candidate}|{spec.started_at!r}}}"

    async def sync(self, spec: CanarySpec, monitor: CanaryMonitor, now: float | None = None) -> FleetCounts:
        """Share this replica's counts and give `monitor` the other replicas'; returns those."""
        now = CANARY_CLOCK() if now is None else now
        base = self.key(spec)
        own = monitor.own_counts(now)
        current = monitor.bucket(now)
        window = range(current - WINDOW_BUCKETS + 1, current + 1)
        ttl = max(1, math.ceil(2 * spec.bounds.window_s))
        pipe = self._client.pipeline(transaction=False)
        for bucket, arms in own.buckets.items():
            pipe.hset(f"{base}:b{bucket}", mapping={f"{self.replica}|{arm}|{name}": getattr(arms[arm], name)
                                                     for arm in ARMS for name in _FIELDS})
            pipe.expire(f"{base}:b{bucket}", ttl)
        if own.shadow_items:
            pipe.hset(f"{base}:shadow", mapping={f"{self.replica}|items": own.shadow_items,
                                                  f"{self.replica}|decisions": own.shadow_decisions})
            pipe.expire(f"{base}:shadow", SHADOW_TTL_S)
        for bucket in window:
            pipe.hgetall(f"{base}:b{bucket}")
        pipe.hgetall(f"{base}:shadow")
        results = await pipe.execute()
        read = results[len(results) - len(window) - 1:]
        others = FleetCounts()
        for bucket, fields in zip(window, read[:-1]):
            counts = self._others_of(fields)
            if counts:
                others.buckets[bucket] = _arm_counts(counts)
        shadow = self._others_of(read[-1])
        others.shadow_items = sum(v for k, v in shadow.items() if k.endswith("|items"))
        others.shadow_decisions = sum(v for k, v in shadow.items() if k.endswith("|decisions"))
        monitor.set_others(others, now=now, valid_for_s=self.stale_after_s)
        return others

    def _others_of(self, fields: dict[Any, Any]) -> dict[str, int]:
        """The fields written by other replicas (their own counts are theirs to judge with)."""
        decoded = {(k.decode() if isinstance(k, bytes) else str(k)): int(v) for k, v in fields.items()}
        return {k: v for k, v in decoded.items() if not k.startswith(f"{self.replica}|")}

    async def close(self) -> None:
        await self._client.aclose()


def _arm_counts(fields: dict[str, int]) -> dict[Arm, ArmCounts]:
    """Summed over replicas: `<replica>|<arm>|<field>` -> per arm."""
    totals: dict[Arm, ArmCounts] = {arm: ArmCounts() for arm in ARMS}
    for key, value in fields.items():
        _, arm, name = key.split("|")
        if arm in totals and name in _FIELDS:
            counts = totals[arm]
            setattr(counts, name, getattr(counts, name) + value)
    return totals
