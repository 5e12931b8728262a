"""Canary assignment (stable, accurate split), the sliding-window monitor and its rollback bounds
(fake clock), shadow disagreement counting."""

from __future__ import annotations

import pytest

from services.router.control.canary import CanaryMonitor, RollbackBounds, canary_fraction, in_canary


@pytest.mark.parametrize("percent", [1.0, 10.0, 50.0])
def test_split_is_accurate_and_stable(percent: float) -> None:
    ids = [f"item-{i}" for i in range(20000)]
    chosen = [i for i in ids if in_canary(i, percent)]
    assert abs(len(chosen) / len(ids) * 100 - percent) < 0.1 * percent + 0.3  # within tolerance
    assert chosen == [i for i in ids if in_canary(i, percent)]  # the same items every time
    assert set(chosen) <= {i for i in ids if in_canary(i, percent * 2)}  # growing the share keeps them in


def test_fraction_is_uniform_enough() -> None:
    fractions = [canary_fraction(f"k{i}") for i in range(10000)]
    deciles = [sum(1 for f in fractions if d / 10 <= f < (d + 1) / 10) for d in range(10)]
    assert all(900 <= count <= 1100 for count in deciles), deciles


def record(monitor: CanaryMonitor, arm: str, n: int, *, blocked: int = 0, errors: int = 0, now: float) -> None:
    for i in range(n):
        monitor.record(arm, blocked=i < blocked, error=i < errors, now=now)  # type: ignore[arg-type]


def test_block_rate_departure_triggers_rollback_only_with_enough_samples() -> None:
    monitor = CanaryMonitor(RollbackBounds(max_block_rate_delta=0.1, min_samples=50, window_s=60))
    record(monitor, "baseline", 100, blocked=5, now=0.0)
    record(monitor, "candidate", 49, blocked=30, now=0.0)
    assert monitor.breach(0.0) is None  # 49 < min_samples
    record(monitor, "candidate", 1, blocked=1, now=1.0)
    reason = monitor.breach(1.0)
    assert reason is not None and reason.startswith("candidate block rate 0.62 vs baseline 0.05 (bound ±0.10")


def test_error_rate_bound_and_window_expiry() -> None:
    monitor = CanaryMonitor(RollbackBounds(max_error_rate_delta=0.05, min_samples=20, window_s=60))
    record(monitor, "baseline", 100, now=0.0)
    record(monitor, "candidate", 20, errors=4, now=0.0)
    assert monitor.breach(10.0) == "candidate error rate 0.20 vs baseline 0.00 (bound +0.05, 20/100 items)"
    assert monitor.counts("candidate", 10.0).items == 20
    assert monitor.counts("candidate", 70.0).items == 0  # slid out of the window
    assert monitor.breach(70.0) is None


def test_within_bounds_no_rollback() -> None:
    monitor = CanaryMonitor(RollbackBounds(max_block_rate_delta=0.1, min_samples=10))
    record(monitor, "baseline", 100, blocked=10, now=0.0)
    record(monitor, "candidate", 100, blocked=15, now=0.0)
    assert monitor.breach(0.0) is None


def test_shadow_disagreements_per_category_with_examples() -> None:
    monitor = CanaryMonitor(RollbackBounds())
    monitor.record_shadow("a", {"hate": "allow", "spam": "allow"}, {"hate": "block", "spam": "allow"}, ("allow", "block"))
    monitor.record_shadow("b", {"hate": "review"}, {"hate": "review", "custom.watch": "block"}, ("review", "block"))
    monitor.record_shadow("c", {"hate": "allow"}, {"hate": "allow"}, ("allow", "allow"))
    shadow = monitor.report(0.0).shadow
    assert (shadow.items, shadow.decisions) == (3, 2)
    assert shadow.per_category == {"hate": 1, "custom.watch": 1}
    assert list(shadow.examples["hate"]) == ["a"] and list(shadow.examples["custom.watch"]) == ["b"]


@pytest.mark.parametrize("field, value, message", [
    ("max_block_rate_delta", 0.0, "max_block_rate_delta must be in (0, 1], got 0.0"),
    ("min_samples", 0, "min_samples must be >= 1, got 0"),
    ("window_s", -1.0, "window_s must be > 0, got -1.0"),
])
def test_bounds_are_validated(field: str, value: float, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        RollbackBounds(**{field: value})  # type: ignore[arg-type]
    assert str(caught.value) == message


def test_a_shadow_candidate_past_its_disagreement_budget_is_rolled_back() -> None:
    monitor = CanaryMonitor(RollbackBounds(min_samples=10, max_decision_disagreement_rate=0.3))
    for i in range(9):  # 9 of 9 disagree, but fewer than min_samples items
        monitor.record_shadow(f"m-{i}", {"spam": "allow"}, {"spam": "review"}, ("allow", "review"))
    assert monitor.breach(0.0) is None
    monitor.record_shadow("m-9", {"spam": "allow"}, {"spam": "allow"}, ("allow", "allow"))
    assert monitor.breach(0.0) == "shadow candidate decided differently on 0.90 of 10 items (bound 0.30)"
    calm = CanaryMonitor(RollbackBounds(min_samples=10))  # default: no disagreement budget
    for i in range(20):
        calm.record_shadow(f"m-{i}", {}, {"spam": "block"}, ("allow", "block"))
    assert calm.breach(0.0) is None
    with pytest.raises(ValueError, match="max_decision_disagreement_rate"):
        RollbackBounds(max_decision_disagreement_rate=0.0)
