"""measure_warm: the fastest of several timed warm runs (a busy host only ever adds time)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from services.common.serving.kserve_servicer import measure_warm


class SlowThenFastModel:
    """A warm-up whose timed runs take 2.5 s (the host still busy starting other services), then 0.3 s, 0.4 s."""

    warmup_items = 1

    def __init__(self, clock: list[float], durations: list[float]) -> None:
        self.clock = clock
        self.durations = list(durations)
        self.runs = 0

    def warmup(self) -> None:
        self.clock[0] += self.durations[self.runs]
        self.runs += 1


def test_keeps_the_fastest_of_the_timed_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])  # the module calls time.monotonic()
    model = SlowThenFastModel(clock, [2.5, 0.3, 0.4])
    items, seconds = measure_warm(model, runs=3)  # type: ignore[misc,arg-type]
    assert (items, model.runs) == (1, 3)
    assert seconds == pytest.approx(0.3)


def test_a_model_that_does_not_say_its_items_is_not_timed() -> None:
    class Silent:
        runs = 0

        def warmup(self) -> None:
            self.runs += 1

    model: Any = Silent()
    assert measure_warm(model) is None and model.runs == 0


def test_runs_must_be_positive() -> None:
    with pytest.raises(ValueError, match="runs must be >= 1"):
        measure_warm(SlowThenFastModel([0.0], [0.1]), runs=0)  # type: ignore[arg-type]
