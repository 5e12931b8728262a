"""Canary counts shared by every router replica, in the Redis of `redis.url`, so that a canary's
automatic rollback judges the whole fleet's traffic, not one replica's share of it.

Each replica keeps counting locally (services/router/control/canary.py: items, blocks, errors per arm
in time buckets of `window_s / 12` on the wall clock, and shadow disagreements). Every `interval_s`
(`sync`) it adds what it counted since its last sync to the canary's Redis hashes (`HINCRBY`, one
hash per bucket, expiring after two windows) and reads back the window's buckets: the fleet's totals,
its own included. Until the next sync, the judgment (`CanaryMonitor.breach`) uses those totals plus
what it counted since, so no item is counted twice; if a sync fails, the counts are kept for the next
one, and once the last totals are older than `stale_after_s` the replica judges on its own counts
again. A replica that finds the bounds exceeded rolls the canary back as before: the store's
compare-and-set makes the rollback land once, whoever sees it first.

Keys: `<redis.key_prefix>:canary:{<policy>|<scope>|<candidate>|<started_at>}:b<bucket>` (per bucket)
and `...:shadow` (the shadow disagreement counts, kept a day).

Example::

    fleet = CanaryFleet(connect(RedisConfig(url=...), timeout_s=1.0), "auditmesh:canary")
    await fleet.sync(spec, monitor)       # then monitor.breach(now) judges the fleet's counts
"""

from __future__ import annotations

import logging
import math
from typing import Any

from services.router.control.canary import ARMS, CANARY_CLOCK, WINDOW_BUCKETS, Arm, ArmCounts, CanaryMonitor, FleetDelta
from services.router.control.store import CanarySpec

log = logging.getLogger(__name__)
#: How long the shadow counts of a canary are kept after their last change.
SHADOW_TTL_S = 86400
_FIELDS = ("items", "blocked", "errors")


class CanaryFleet:
    """See the module docstring. Use from the event loop (the monitors are not thread-safe)."""

    def __init__(self, client: Any, prefix: str, *, stale_after_s: float = 5.0) -> None:
        self._client = client
        self._prefix = prefix
        self.stale_after_s = stale_after_s

    def key(self, spec: CanarySpec) -> str:
        """The prefix of one canary's keys (its identity in braces: one Redis Cluster slot)."""
        return f"{self._prefix}:{{{spec.policy}|{spec.scope}|{spec.candidate}|{spec.started_at!r}}}"

    async def sync(self, spec: CanarySpec, monitor: CanaryMonitor, now: float | None = None) -> FleetDelta:
        """Add this replica's new counts to the fleet's and give `monitor` the fleet's totals; returns
        them. On an error the new counts stay with the monitor for the next sync, and the error is raised."""
        now = CANARY_CLOCK() if now is None else now
        base = self.key(spec)
        delta = monitor.take_unsynced()
        current = monitor.bucket(now)
        window = range(current - WINDOW_BUCKETS + 1, current + 1)
        ttl = max(1, math.ceil(2 * spec.bounds.window_s))
        try:
            pipe = self._client.pipeline(transaction=False)
            for bucket, arms in delta.buckets.items():
                if bucket < window.start:
                    continue
                for arm in ARMS:
                    counts = arms[arm]
                    for name in _FIELDS:
                        if getattr(counts, name):
                            pipe.hincrby(f"{base}:b{bucket}", f"{arm}:{name}", getattr(counts, name))
                pipe.expire(f"{base}:b{bucket}", ttl)
            if delta.shadow_items:
                pipe.hincrby(f"{base}:shadow", "items", delta.shadow_items)
                pipe.hincrby(f"{base}:shadow", "decisions", delta.shadow_decisions)
                pipe.expire(f"{base}:shadow", SHADOW_TTL_S)
            for bucket in window:
                pipe.hgetall(f"{base}:b{bucket}")
            pipe.hgetall(f"{base}:shadow")
            results = await pipe.execute()
        except BaseException:
            monitor.restore_unsynced(delta)
            raise
        read = results[len(results) - len(window) - 1:]
        fleet = FleetDelta({bucket: _arm_counts(fields) for bucket, fields in zip(window, read[:-1]) if fields})
        shadow = _decoded(read[-1])
        fleet.shadow_items, fleet.shadow_decisions = shadow.get("items", 0), shadow.get("decisions", 0)
        monitor.set_fleet(fleet, now=now, valid_for_s=self.stale_after_s)
        return fleet

    async def close(self) -> None:
        await self._client.aclose()


def _decoded(fields: dict[Any, Any]) -> dict[str, int]:
    return {(k.decode() if isinstance(k, bytes) else str(k)): int(v) for k, v in fields.items()}


def _arm_counts(fields: dict[Any, Any]) -> dict[Arm, ArmCounts]:
    values = _decoded(fields)
    return {arm: ArmCounts(*(values.get(f"{arm}:{name}", 0) for name in _FIELDS)) for arm in ARMS}
