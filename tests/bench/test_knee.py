"""The knee search: grows while steps pass, bisects after the first failure, goes down if the first fails."""

from __future__ import annotations

import pytest

from bench.knee import KneeSearch


def run(search: KneeSearch, capacity: float) -> KneeSearch:
    rate = search.next_rate()
    while rate is not None:
        search.record(rate, passed=rate <= capacity)
        rate = search.next_rate()
    return search


def test_finds_the_knee_within_the_precision() -> None:
    search = run(KneeSearch(start_rps=100, growth=1.5, precision=1.1, max_steps=20), capacity=730)
    assert search.knee is not None and 730 / 1.1 <= search.knee <= 730


def test_goes_down_when_the_first_step_fails() -> None:
    search = run(KneeSearch(start_rps=100, growth=2.0, precision=1.5, max_steps=20), capacity=30)
    assert search.tried[:3] == [100.0, 50.0, 25.0] and search.knee is not None and 20 <= search.knee <= 30


def test_stops_at_max_steps_and_max_rps() -> None:
    assert len(run(KneeSearch(start_rps=1, growth=2.0, max_steps=4), capacity=1e9).tried) == 4
    assert run(KneeSearch(start_rps=1, growth=2.0, max_rps=5, max_steps=20), capacity=1e9).tried == [1.0, 2.0, 4.0, 5.0]


def test_no_knee_when_nothing_passes() -> None:
    search = run(KneeSearch(start_rps=8, growth=2.0, min_rps=1, max_steps=20), capacity=0.5)
    assert search.knee is None and search.tried == [8.0, 4.0, 2.0, 1.0]


@pytest.mark.parametrize("field, value", [("start_rps", 0.0), ("growth", 1.0), ("precision", 0.9), ("max_steps", 0)])
def test_rejects_bad_settings(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        KneeSearch(**{"start_rps": 1.0, field: value})  # type: ignore[arg-type]
