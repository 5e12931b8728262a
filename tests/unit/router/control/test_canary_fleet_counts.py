"""A canary monitor judging the fleet's counts (services/router/control/canary.py): what it shares is
its own window of counts (a copy: sharing it twice changes nothing); the other replicas' counts, while
fresh, are added to its own for the rollback judgment; stale ones are not."""

from __future__ import annotations

from services.router.control.canary import Arm, ArmCounts, CanaryMonitor, FleetCounts, RollbackBounds

BOUNDS = RollbackBounds(max_block_rate_delta=0.2, min_samples=10, window_s=60.0)


def feed(monitor: CanaryMonitor, arm: Arm, items: int, blocked: int, now: float) -> None:
    for i in range(items):
        monitor.record(arm, blocked=i < blocked, error=False, now=now)


def test_own_counts_are_the_window_as_a_copy() -> None:
    monitor = CanaryMonitor(BOUNDS)
    feed(monitor, "candidate", 3, 1, now=100.0)
    feed(monitor, "candidate", 2, 0, now=101.0)
    own = monitor.own_counts(101.0)
    assert sum(b["candidate"].items for b in own.buckets.values()) == 5
    own.buckets[monitor.bucket(101.0)]["candidate"].items += 100  # a copy: the monitor is untouched
    assert monitor.counts("candidate", 101.0).items == 5
    assert monitor.own_counts(100.0 + 61).buckets == {}  # out of the window


def test_the_fleet_breaches_where_this_replica_alone_does_not() -> None:
    monitor = CanaryMonitor(BOUNDS)
    feed(monitor, "baseline", 5, 0, now=100.0)
    feed(monitor, "candidate", 5, 5, now=100.0)
    assert monitor.breach(100.0) is None  # 5 < min_samples per arm
    others = FleetCounts({monitor.bucket(100.0): {"baseline": ArmCounts(10, 0, 0), "candidate": ArmCounts(10, 9, 0)}})
    monitor.set_others(others, now=100.0, valid_for_s=5.0)
    reason = monitor.breach(100.5)
    assert reason is not None and "15/15 items" in reason
    feed(monitor, "baseline", 1, 0, now=101.0)
    assert monitor.counts("baseline", 101.0, fleet=True).items == 16
    assert monitor.counts("baseline", 101.0).items == 6  # this replica's own
    assert monitor.breach(106.0) is None  # the others' counts are stale: its own alone


def test_shadow_disagreements_are_judged_across_the_fleet() -> None:
    monitor = CanaryMonitor(RollbackBounds(min_samples=10, max_decision_disagreement_rate=0.5))
    for i in range(4):
        monitor.record_shadow(f"i{i}", {"hate": "allow"}, {"hate": "block"}, ("allow", "block"))
    assert monitor.breach(100.0) is None
    monitor.set_others(FleetCounts(shadow_items=8, shadow_decisions=6), now=100.0, valid_for_s=5.0)
    reason = monitor.breach(100.0)
    assert reason is not None and "0.83 of 12 items" in reason
