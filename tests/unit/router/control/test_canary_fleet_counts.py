"""A canary monitor judging the fleet's counts (services/router/control/canary.py): counts since the
last sync are kept apart, a failed sync keeps them, fresh fleet totals plus the new local counts are
judged, stale ones are not."""

from __future__ import annotations

from services.router.control.canary import ArmCounts, CanaryMonitor, FleetDelta, RollbackBounds

BOUNDS = RollbackBounds(max_block_rate_delta=0.2, min_samples=10, window_s=60.0)


def feed(monitor: CanaryMonitor, arm: str, items: int, blocked: int, now: float) -> None:
    for i in range(items):
        monitor.record(arm, blocked=i < blocked, error=False, now=now)  # type: ignore[arg-type]


def test_unsynced_counts_are_taken_once_and_restored_after_a_failed_sync() -> None:
    monitor = CanaryMonitor(BOUNDS)
    feed(monitor, "candidate", 3, 1, now=100.0)
    delta = monitor.take_unsynced()
    assert delta.buckets[monitor.bucket(100.0)]["candidate"] == ArmCounts(3, 1, 0)
    assert monitor.take_unsynced().empty
    feed(monitor, "candidate", 2, 0, now=101.0)
    monitor.restore_unsynced(delta)
    assert monitor.take_unsynced().buckets[monitor.bucket(100.0)]["candidate"] == ArmCounts(5, 1, 0)


def test_the_fleet_breaches_where_this_replica_alone_does_not() -> None:
    monitor = CanaryMonitor(BOUNDS)
    feed(monitor, "baseline", 5, 0, now=100.0)
    feed(monitor, "candidate", 5, 5, now=100.0)
    assert monitor.breach(100.0) is None  # 5 < min_samples per arm
    synced = monitor.take_unsynced()
    fleet = FleetDelta()
    fleet.add(synced)  # this replica's own synced counts ...
    other = FleetDelta({monitor.bucket(100.0): {"baseline": ArmCounts(10, 0, 0), "candidate": ArmCounts(10, 9, 0)}})
    fleet.add(other)  # ... and another replica's
    monitor.set_fleet(fleet, now=100.0, valid_for_s=5.0)
    reason = monitor.breach(100.5)
    assert reason is not None and "15/15 items" in reason
    # Counted since the sync: added to the fleet's totals, not counted twice.
    feed(monitor, "baseline", 1, 0, now=101.0)
    assert monitor.counts("baseline", 101.0, fleet=True).items == 16
    assert monitor.counts("baseline", 101.0).items == 6  # this replica's own
    # Stale fleet totals: back to this replica's own counts.
    assert monitor.breach(106.0) is None


def test_shadow_disagreements_are_judged_across_the_fleet() -> None:
    monitor = CanaryMonitor(RollbackBounds(min_samples=10, max_decision_disagreement_rate=0.5))
    for i in range(4):
        monitor.record_shadow(f"i{i}", {"hate": "allow"}, {"hate": "block"}, ("allow", "block"))
    assert monitor.breach(100.0) is None
    fleet = FleetDelta(shadow_items=4 + 8, shadow_decisions=4 + 6)
    monitor.take_unsynced()
    monitor.set_fleet(fleet, now=100.0, valid_for_s=5.0)
    reason = monitor.breach(100.0)
    assert reason is not None and "0.83 of 12 items" in reason
