"""Issue 41: canary counts shared across router replicas through a real Redis (started here)
(services/router/canary_fleet.py).

Three replicas each see a third of a canary's traffic: none alone has the samples to judge it, the
fleet's counts do and exceed the bounds, and every replica then rolls it back. Repeated syncs count
nothing twice; after Redis comes back empty, the next syncs restore every replica's counts.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from pathlib import Path

import pytest

from services.launcher import ROOT
from services.router.canary_fleet import CanaryFleet
from services.router.config import load_router_config
from services.router.control.canary import CanaryMonitor, RollbackBounds
from services.router.control.store import CanarySpec
from services.router.policy_lifecycle import PolicyLifecycle
from services.router.redis_state import RedisConfig, connect
from tests.servers import RedisServer

BOUNDS = RollbackBounds(max_block_rate_delta=0.2, min_samples=30, window_s=60.0)
SPEC = CanarySpec("default", "", "1", "2", 50.0, False, BOUNDS, "ops", 1234.5)


def fleet_for(url: str) -> CanaryFleet:
    return CanaryFleet(connect(RedisConfig(url=url), timeout_s=1.0), "auditmesh:canary")


def traffic(monitor: CanaryMonitor, now: float) -> None:
    """A third of the fleet's traffic: 12 baseline items (1 blocked), 12 candidate items (8 blocked)."""
    for i in range(12):
        monitor.record("baseline", blocked=i == 0, error=False, now=now)
        monitor.record("candidate", blocked=i < 8, error=False, now=now)


async def test_replicas_judge_the_fleets_traffic(tmp_path: Path) -> None:
    server = RedisServer(tmp_path)
    server.start()
    replicas = [(CanaryMonitor(BOUNDS), fleet_for(server.url)) for _ in range(3)]
    now = 1_800_000_000.0
    try:
        for monitor, _ in replicas:
            traffic(monitor, now)
            assert monitor.breach(now) is None  # 12 items per arm < min_samples 30
        for monitor, fleet in replicas:
            await fleet.sync(SPEC, monitor, now)
        for monitor, fleet in replicas:
            others = await fleet.sync(SPEC, monitor, now + 1)  # every replica's counts are in Redis now
            assert sum(b["candidate"].items for b in others.buckets.values()) == 24  # the two others'
            assert monitor.counts("candidate", now + 1, fleet=True).items == 36
            reason = monitor.breach(now + 1)
            assert reason is not None and "36/36 items" in reason
        # Syncing again, any number of times, counts nothing twice.
        monitor, fleet = replicas[0]
        for _ in range(3):
            await fleet.sync(SPEC, monitor, now + 2)
        assert monitor.counts("candidate", now + 2, fleet=True).items == 36
        # Redis down: the sync fails, the replica keeps judging (its own counts once the others' are stale).
        server.stop()
        with pytest.raises(Exception):
            await fleet.sync(SPEC, monitor, now + 3)
        assert monitor.counts("candidate", now + 3 + fleet.stale_after_s, fleet=True).items == 12
        # Back, empty (no persistence): each replica's next sync writes its totals again, nothing is lost.
        server.start()
        for other, other_fleet in replicas[1:]:
            await other_fleet.sync(SPEC, other, now + 4)
        await fleet.sync(SPEC, monitor, now + 4)
        assert monitor.counts("candidate", now + 4, fleet=True).items == 36
    finally:
        for _, fleet in replicas:
            await fleet.close()
        server.stop()


async def test_two_router_lifecycles_roll_back_on_the_fleets_counts(tmp_path: Path) -> None:
    """The wiring: two routers' lifecycles (one policy store, one Redis) each see half a canary's traffic,
    too little alone; their sync loops share the counts and the canary is rolled back in the store."""
    server = RedisServer(tmp_path)
    server.start()
    config = load_router_config(ROOT / "config" / "router.yaml")
    settings = replace(config.lifecycle, store_path=str(tmp_path / "store.sqlite"), audit_path=str(tmp_path / "audit.sqlite"))
    config = replace(config, lifecycle=settings, redis=RedisConfig(url=server.url),
                     policies_dir=str(ROOT / "config" / "policies"), tenants_file=str(ROOT / "config" / "tenants.yaml"))
    first, second = PolicyLifecycle.open(config), PolicyLifecycle.open(config)
    first.register(None)
    second.register(None)
    try:
        text = (ROOT / "config" / "policies" / "default.yaml").read_text()
        first.control.put("policy", re.sub(r'(?m)^version: .*$', 'version: "fleet-candidate"', text), author="test")
        bounds = RollbackBounds(max_block_rate_delta=0.2, min_samples=30, window_s=60.0)
        spec = first.control.start_canary("default", "", "fleet-candidate", 50.0, shadow=False, bounds=bounds, author="test")
        second.control.reload()
        tenant = first.runtime.snapshot.tenants.tenants["acme"]
        per_arm = {"baseline": 0, "candidate": 0}
        for i in range(400):
            lifecycle = (first, second)[i % 2]
            selection = lifecycle.runtime.snapshot.select(tenant, "default", f"item-{i}")
            if selection.arm is None or per_arm[selection.arm] >= 40:
                continue
            per_arm[selection.arm] += 1
            decision = "block" if selection.arm == "candidate" else "allow"
            assert lifecycle.runtime.observe(selection, f"item-{i}", decision=decision, actions={}) is None
        assert per_arm == {"baseline": 40, "candidate": 40}  # 20 per arm per replica: under min_samples alone
        deadline = asyncio.get_running_loop().time() + 5
        while first.control.canary_spec("default", "").running:
            assert asyncio.get_running_loop().time() < deadline, "the fleet's counts did not roll the canary back"
            await asyncio.sleep(0.1)
        stopped = first.control.canary_spec("default", "")
        assert stopped.started_at == spec.started_at and "auto-rollback" in stopped.stopped_reason
    finally:
        await first.close()
        await second.close()
        server.stop()
