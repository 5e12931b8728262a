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


def test_repeats_the_bracket_and_decides_it_by_majority() -> None:
    # 400/s fails once by chance (its first run), then passes twice: the majority keeps it.
    flaky = {400.0: [False, True, True]}
    search = KneeSearch(start_rps=100, growth=2.0, precision=1.5, max_steps=30, repeats=3)
    rate = search.next_rate()
    while rate is not None:
        outcomes = flaky.get(rate)
        search.record(rate, passed=outcomes.pop(0) if outcomes else rate <= 500)
        rate = search.next_rate()
    assert search.knee is not None and 400 <= search.knee <= 500
    assert search.runs[400.0] == [False, True, True]
    assert all(len(search.runs[r]) >= 2 for r in (search.knee, min(r for r in search.runs if r > search.knee)))


def test_a_single_spike_at_the_bracket_does_not_decide_the_knee() -> None:
    # Without repeats the first failing run ends the growth; with them the knee lands near the capacity.
    def spiky(repeats: int) -> KneeSearch:
        search = KneeSearch(start_rps=100, growth=2.0, precision=1.2, max_steps=40, repeats=repeats)
        seen: set[float] = set()
        rate = search.next_rate()
        while rate is not None:
            first = rate not in seen
            seen.add(rate)
            search.record(rate, passed=rate <= 1000 and not (rate == 200.0 and first))
            rate = search.next_rate()
        return search
    assert (spiky(1).knee or 0) < 200
    repeated = spiky(3)
    assert repeated.knee is not None and 1000 / 1.2 <= repeated.knee <= 1000


def test_interval_spans_from_unanimous_passes_to_unanimous_failures() -> None:
    search = KneeSearch(start_rps=100, repeats=3)
    for rate, outcomes in {100.0: [True], 200.0: [True, False, True], 300.0: [False, True, False], 400.0: [False]}.items():
        for passed in outcomes:
            search.record(rate, passed=passed)
    assert search.knee == 200.0
    assert search.interval == (100.0, 400.0)


def test_interval_without_a_failure_above_is_open() -> None:
    search = KneeSearch(start_rps=100)
    search.record(100.0, passed=True)
    assert search.interval == (100.0, None)
    assert KneeSearch(start_rps=1).interval is None
