"""The flood guard on a fake clock: a key matching far above its own baseline floods; steady traffic,
a slow rise and a quiet key do not; a flood lasts until a window ends below the bar; memory stays bounded."""

from __future__ import annotations

import pytest

from services.match.flood import FloodGuard, FloodSettings

SETTINGS = FloodSettings(window_s=10.0, min_matches=50, factor=10.0)


def feed(guard: FloodGuard, key: str, count: int, start: float, span: float = 9.0) -> bool:
    """`count` matches of `key` spread over [start, start + span); whether the last one floods."""
    flooding = False
    for index in range(count):
        flooding = guard.observe(key, start + span * index / count)
    return flooding


def test_a_key_far_above_its_baseline_floods_and_is_reported_once() -> None:
    guard = FloodGuard(SETTINGS)
    for window in range(5):
        assert not feed(guard, "logo", 8, start=window * 10.0)  # baseline about 8 a window
    assert not feed(guard, "logo", 60, start=50.0)  # 60 < 10 x baseline (6.6)
    assert not feed(guard, "logo", 200, start=60.0)  # 200 < 10 x baseline (22.7)
    assert feed(guard, "logo", 1000, start=70.0)    # >= 10 x baseline (75.9): a flood
    new = guard.take_new()
    assert [f.key for f in new] == ["logo"] and new[0].count == 759 and round(new[0].baseline, 1) == 75.9
    assert guard.take_new() == []
    assert [f.key for f in guard.flooding(now=79.5)] == ["logo"] and guard.active(79.5) == ["logo"]
    assert guard.observe("logo", 81.0)  # its window ended above the bar: the flood (and a quarantine) goes on
    assert guard.take_new() == []       # ... as the same flood, reported once
    for _ in range(10):
        guard.observe("logo", 82.0)     # this window ends below the bar (the flood added at most its bar, 759)
    assert not guard.observe("logo", 91.0) and guard.active(91.0) == []


def test_a_new_key_needs_min_matches_and_a_quiet_one_never_floods() -> None:
    guard = FloodGuard(SETTINGS)
    assert not feed(guard, "new", 49, start=0.0)
    assert guard.observe("new", 9.5)  # the 50th in its first window: baseline 0 counts as 1
    assert not feed(guard, "quiet", 3, start=0.0)
    assert [f.key for f in guard.flooding(now=9.9)] == ["new"]


def test_steady_heavy_traffic_is_its_own_baseline() -> None:
    guard = FloodGuard(SETTINGS)
    assert feed(guard, "wave", 500, start=0.0)  # a real campaign's first window floods...
    guard.take_new()
    floods = [feed(guard, "wave", 500, start=window * 10.0) for window in range(1, 8)]
    assert floods[-1] is False  # ...and once it is the normal rate it no longer does


def test_memory_is_bounded_by_max_tracked() -> None:
    guard = FloodGuard(FloodSettings(window_s=10.0, min_matches=2, factor=1.0, max_tracked=3))
    for key in "abcd":
        guard.observe(key, 1.0)
    assert not guard.observe("a", 1.5)  # "a" was forgotten: this is its first match again
    assert guard.observe("d", 1.5)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("window_s", 0.0, "window_s must be > 0"), ("min_matches", 0, "min_matches must be >= 1"),
    ("factor", 0.5, "factor must be >= 1"), ("max_tracked", 0, "max_tracked must be >= 1")])
def test_settings_are_validated(field: str, value: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FloodSettings(**{field: value})  # type: ignore[arg-type]
